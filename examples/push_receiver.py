"""A receiver of debounce's push delivery (docs/consumers.md, "Push delivery"): verifies each
delivery with the subscription's secret (the `standardwebhooks` package), applies a batch once
(a redelivery carries the same webhook-id), and prints each change. A 2xx tells debounce to
send the next batch; anything else, and it sends this one again later.
Run: python examples/push_receiver.py PORT whsec_...   (debounce subscriptions add prints it)"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook, WebhookVerificationError


class Receiver:
    """What a consumer keeps: the batches applied (by webhook-id), the changes in order, and
    the cursor after them (to replay from, should the index be lost)."""

    def __init__(self, secret: str) -> None:
        self.webhook = Webhook(secret)
        self.applied: set[str] = set()
        self.changes: list[dict] = []
        self.cursor: str | None = None
        self.lock = threading.Lock()

    def receive(self, headers: dict[str, str], body: bytes) -> int:
        """The HTTP status to answer one delivery."""
        try:
            payload = self.webhook.verify(body, headers)  # signature and timestamp (±5 min)
        except WebhookVerificationError:
            return 401  # not from debounce (or a wrong secret): debounce retries, then disables
        msg_id = headers["webhook-id"]
        with self.lock:
            if msg_id in self.applied:
                return 200  # a redelivery: applied already
            for change in payload["data"]["changes"]:
                self.changes.append(change)  # here: re-read or delete the document, re-embed
                print(
                    f"{change['op']} {change['source']}/{change['document_id']} "
                    f"{change['content_sha256'][:12]}",
                    flush=True,
                )
            self.applied.add(msg_id)
            self.cursor = payload["data"]["cursor"]
        return 200


def server(receiver: Receiver, port: int) -> ThreadingHTTPServer:
    """An HTTP server on 127.0.0.1:``port`` (0: any free port) answering POSTs on any path."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            status = receiver.receive({k.lower(): v for k, v in self.headers.items()}, body)
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps({"status": status}).encode())

        def log_message(self, *args: object) -> None:
            pass  # one line per change is printed instead

    return ThreadingHTTPServer(("127.0.0.1", port), Handler)


if __name__ == "__main__":
    port, secret = int(sys.argv[1]), sys.argv[2]
    print(f"receiving on http://127.0.0.1:{port}/", flush=True)
    try:
        server(Receiver(secret), port).serve_forever()
    except KeyboardInterrupt:
        pass
