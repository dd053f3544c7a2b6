"""Load generator on wrk (Debian's ``wrk``, C): the same signed webhooks as ``bench.loadgen``.

``python -m bench.wrkload --url http://127.0.0.1:PORT --events N --pages P --concurrency C``
takes ``bench.loadgen``'s arguments and prints the same JSON keys. The webhooks
(``loadgen.Bodies``: unique event ids, signed with ``debounce.cli.sign_request``) are written to
a file before the clock starts; ``bench/wrk_webhooks.lua`` has each of wrk's threads (one per
core) send its share once over ``C`` connections in all, and stop. A client that costs a few
microseconds per request leaves the cores to the web process and Postgres, which a Python
client on a 2-core machine does not (issue 24 measured the web with wrk). Latency percentiles
are wrk's own (from the request's send to its answer), over every request wrk sent: the
counted ones and at most one repeated delivery per connection at the end (see the script).
Requests/s: answered requests from the first request to the last counted answer.
Bounded: N requests at most, and ``--deadline`` seconds of wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.loadgen import Bodies, add_arguments

SCRIPT = Path(__file__).resolve().parent / "wrk_webhooks.lua"
#: wrk's threads: one per core of the machine the benchmarks were written for (2).
THREADS = 2


def available() -> bool:
    """Whether ``wrk`` is on PATH (``apt-get install wrk``)."""
    return shutil.which("wrk") is not None


def _line(path: str, headers: dict[str, str], body: bytes) -> str:
    text = body.decode()
    if "\t" in text or "\n" in text or any("\t" in v or "\n" in v for v in headers.values()):
        raise ValueError("a request line may hold no tab or newline")
    return "\t".join((path, "\x1f".join(f"{k}\x1e{v}" for k, v in headers.items()), text))


def write_requests(file: Path, events: int, pages: int, hot: bool, trivial: str | None) -> None:
    """The requests of one run, one a line (the format ``bench/wrk_webhooks.lua`` reads)."""
    bodies = Bodies()
    with file.open("w") as out:
        for i in range(events):
            if trivial is not None:
                out.write(_line(trivial, {}, b"") + "\n")
                continue
            source, body, headers = bodies.make(i, pages, hot)
            out.write(
                _line(f"/webhooks/{source}", {"Content-Type": "application/json", **headers}, body) + "\n"
            )


def run_wrk(url: str, file: Path, concurrency: int, deadline: float) -> dict[str, Any]:
    """Send every request of ``file`` once with wrk; its JSON line (see the script).

    Raises:
        RuntimeError: wrk is missing, printed no JSON line, or did not finish in time.
    """
    exe = shutil.which("wrk")
    if exe is None:
        raise RuntimeError("wrk is not installed (apt-get install wrk)")
    with tempfile.TemporaryDirectory(prefix="bench-wrk-") as markers:
        cmd = [
            exe,
            "-t",
            str(THREADS),
            "-c",
            str(max(concurrency, THREADS)),
            "-d",
            f"{int(deadline)}s",
            "--timeout",
            "10s",
            "-s",
            str(SCRIPT),
            url,
            "--",
            str(file),
            str(THREADS),
            markers,
        ]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            stop_at = time.monotonic() + deadline + 5
            while proc.poll() is None and time.monotonic() < stop_at:
                if len(os.listdir(markers)) >= THREADS:
                    proc.send_signal(signal.SIGINT)  # wrk stops, prints, calls done()
                    break
                time.sleep(0.01)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    lines = [ln for ln in out.decode().splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"wrk printed no figures: {err.decode()[-500:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def run(
    url: str,
    events: int,
    pages: int,
    concurrency: int,
    hot: bool,
    warmup: int,
    deadline: float,
    trivial: str | None = None,
) -> dict[str, Any]:
    """``bench.loadgen.run``'s figures, sent by wrk."""
    with tempfile.TemporaryDirectory(prefix="bench-wrkload-") as tmp:
        if warmup:
            warm = Path(tmp) / "warmup.txt"
            write_requests(warm, warmup, pages, False, None)
            run_wrk(url, warm, concurrency, 30)
        work = Path(tmp) / "work.txt"
        write_requests(work, events, pages, hot, trivial)
        w = run_wrk(url, work, concurrency, deadline)
    elapsed = w["last"] - w["first"] if w["last"] > w["first"] else 0.0
    answered = int(w["answered"])
    errors = {k: w[k] for k in ("socket_errors", "timeouts") if w[k]}
    return {
        "requests": answered,
        "seconds": round(elapsed, 3),
        "requests_per_s": round(answered / elapsed, 1) if elapsed else 0.0,
        "p50_ms": round(w["p50_us"] / 1000, 2),
        "p95_ms": round(w["p95_us"] / 1000, 2),
        "p99_ms": round(w["p99_us"] / 1000, 2),
        "max_ms": round(w["max_us"] / 1000, 2),
        "non_2xx": int(w["non_2xx"]),
        "statuses": {"2xx": answered - int(w["non_2xx"]), "other": int(w["non_2xx"])},
        "client_errors": errors,
        "unsent": events - answered,
        "repeated": max(0, int(w["sent_by_wrk"]) - answered),
        "client": "wrk",
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.wrkload")
    add_arguments(p)
    a = p.parse_args(argv)
    if not a.url.startswith(("http://127.0.0.1", "http://localhost")):
        raise SystemExit("loopback only")
    if not available():
        raise SystemExit("wrk is not installed (apt-get install wrk)")
    print(
        json.dumps(run(a.url, a.events, a.pages, a.concurrency, a.hot, a.warmup, a.deadline, a.trivial)),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
