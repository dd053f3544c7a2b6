"""The plumbing every process stands on, naming no domain: connections and pools (:mod:`.db`),
the reviewed SQL files (:mod:`.sql`), backoff (:mod:`.retry`), statement batching
(:mod:`.batcher`), credentials at rest (:mod:`.secrets`), logs and metrics (:mod:`.logs`,
:mod:`.metrics`), the event loop and the heap of a long-running process (:mod:`.eventloop`,
:mod:`.heap`), the uvicorn server class (:mod:`.server`) and the embedded Postgres of a first run
(:mod:`.embedded`)."""
