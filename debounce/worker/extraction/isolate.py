"""Extraction in a throwaway child process, bounded in bytes, time and memory.

Parsers of PDFs and Office files are large C and C++ libraries reading files strangers made:
PDFium can abort (SIGABRT) or segfault on a malformed PDF, which no ``try`` catches, and a
hostile spreadsheet can ask for all the memory there is (onyx #12222, #12517; airbyte #32675).
So the worker never parses a file itself: each extraction runs in a fresh child, forked from a
``multiprocessing`` fork server that has the readers imported already (a child costs a fork,
not an interpreter start and 1 s of imports). The child lowers its own limits first —
``RLIMIT_AS`` (its address space may grow by ``memory_bytes``; Linux), ``RLIMIT_CORE`` 0 (no
core files) — then reads the file and sends the Markdown back through a pipe. The parent waits
at most ``timeout_seconds`` and kills it after that. Whatever the child does (crash, hang,
exhaust its memory), the caller gets :class:`Extracted` or :class:`ExtractionFailed`.

Blocking: call :func:`extract_file` from a thread (``asyncio.to_thread``) in async code.
"""

from __future__ import annotations

import mimetypes
import multiprocessing
import os
import resource
import signal
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess
from typing import Any

from debounce.worker.extraction.limits import (
    Extracted,
    ExtractionFailed,
    ExtractionLimits,
    megabytes,
    too_large,
)

__all__ = ["extract_bytes", "extract_file", "format_of"]

#: What the fork server imports once, so each child starts with the readers loaded. The main
#: module too: a child re-imports the parent's main module unless its server has it already.
_PRELOAD = ["__main__", "debounce.worker.extraction.formats"]
#: Media types that say nothing about the content: the file's name decides then.
_GENERIC = {"", "application/octet-stream", "binary/octet-stream", "application/binary"}
_BY_SUFFIX = {".md": "text/markdown", ".markdown": "text/markdown", ".csv": "text/csv", ".txt": "text/plain"}

_lock = threading.Lock()
_context: ForkServerContext | None = None


def _forkserver() -> ForkServerContext:
    global _context
    with _lock:
        if _context is None:
            context = multiprocessing.get_context("forkserver")
            assert isinstance(context, ForkServerContext)
            context.set_forkserver_preload(_PRELOAD)
            _context = context
        return _context


def format_of(media_type: str, name: str, limits: ExtractionLimits) -> tuple[str, str | None]:
    """``(media type, format)`` of a file: its ``media_type``, or the one its ``name``'s suffix
    says when the media type is generic (``application/octet-stream``); the format is ``None``
    when the limits do not extract that media type."""
    base = media_type.split(";", 1)[0].strip().lower()
    if base in _GENERIC:
        suffix = os.path.splitext(name)[1].lower()
        base = _BY_SUFFIX.get(suffix) or mimetypes.guess_type(name)[0] or base
    return base, limits.format_of(base)


def _address_space() -> int:
    """This process's address space now (bytes; Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _peak() -> int:
    """This process's peak resident memory (bytes; Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _child(conn: Connection, path: str, fmt: str, limits: ExtractionLimits) -> None:
    """The child's whole life: lower its limits, read, send one message, exit."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if sys.platform.startswith("linux") and limits.memory_bytes > 0:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (_address_space() + limits.memory_bytes, hard))
    message: tuple[Any, ...]
    try:
        from debounce.worker.extraction import formats

        out = formats.read(path, fmt, limits)
        message = ("ok", out.markdown(), out.truncated, out.pages, _peak())
    except ExtractionFailed as exc:
        message = ("failed", exc.code, exc.reason, _peak())
    except MemoryError:
        message = (
            "failed",
            "out_of_memory",
            f"out of memory: needed more than {megabytes(limits.memory_bytes)}",
            _peak(),
        )
    conn.send(message)
    conn.close()


def _reap(process: BaseProcess, grace: float = 5.0) -> None:
    """Wait for a child that has answered (or was killed) to exit; kill it after ``grace``
    seconds."""
    process.join(grace)
    if process.is_alive():
        process.kill()
        process.join()
    process.close()


def _died(exitcode: int | None) -> ExtractionFailed:
    if exitcode is not None and exitcode < 0:
        try:
            name = f" {signal.Signals(-exitcode).name}"
        except ValueError:
            name = ""
        return ExtractionFailed("crashed", f"crashed (signal {-exitcode}{name})")
    return ExtractionFailed("crashed", f"crashed (exit code {exitcode})")


#: What a media type's major type is not read for (metadata only).
_NOT_READ = {"image": "no OCR", "audio": "no transcription", "video": "no transcription"}


def not_extracted(base: str) -> str:
    """Why a file of media type ``base`` (no parameters) has no text: metadata only, and for
    images, audio and video what is not done (``image/png: metadata only (no OCR)``)."""
    what = base or "unknown media type"
    missing = _NOT_READ.get(base.split("/", 1)[0])
    return f"{what}: metadata only ({missing})" if missing else f"{what}: not extracted (metadata only)"


def extract_file(path: str, media_type: str, limits: ExtractionLimits, *, name: str = "") -> Extracted:
    """The Markdown of the file at ``path``, read in a child process within ``limits``.

    ``media_type`` picks the reader (see :func:`format_of`; ``name`` decides a generic one).
    Blocks up to ``limits.timeout_seconds`` (plus the child's start and exit).

    Raises:
        ExtractionFailed: ``too_large`` (the file is over ``max_bytes``), ``not_extracted``
            (a media type the limits do not extract: metadata only), ``timeout`` (killed after
            ``timeout_seconds``), ``crashed`` (the child died: a signal or an exit code),
            ``out_of_memory``, or the reader's reason (``encrypted``, ``no_text``,
            ``zip_bomb``, ``xml_entities``, ``malformed``, ``undecodable``).
    """
    size = os.path.getsize(path)
    if size > limits.max_bytes:
        raise ExtractionFailed("too_large", too_large(size, limits))
    base, fmt = format_of(media_type, name, limits)
    if fmt is None:
        raise ExtractionFailed("not_extracted", not_extracted(base))
    context = _forkserver()
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(
        target=_child, args=(sender, path, fmt, limits), daemon=True, name="debounce-extraction"
    )
    started = time.monotonic()
    process.start()
    sender.close()
    try:
        if not receiver.poll(limits.timeout_seconds):
            process.kill()
            raise ExtractionFailed("timeout", f"extraction timed out after {limits.timeout_seconds:g} s")
        try:
            message = receiver.recv()
        except (EOFError, OSError):
            process.join(5)
            raise _died(process.exitcode) from None
    finally:
        receiver.close()
        # The answer is in: the child's exit (unmapping its memory) is reaped off the caller's
        # time, and killed if it lingers.
        threading.Thread(target=_reap, args=(process,), daemon=True, name="extraction-reaper").start()
    seconds = time.monotonic() - started
    if message[0] == "failed":
        raise ExtractionFailed(message[1], message[2])
    _, markdown, truncated, pages, peak = message
    return Extracted(
        markdown=markdown,
        truncated=truncated,
        pages=pages,
        format=fmt,
        child_peak_bytes=peak,
        seconds=seconds,
    )


def extract_bytes(data: bytes, media_type: str, limits: ExtractionLimits, *, name: str = "") -> Extracted:
    """:func:`extract_file` of ``data`` (written to a temporary file the child reads, removed
    after).

    Raises:
        ExtractionFailed: as :func:`extract_file`; ``too_large`` before anything is written.
    """
    if len(data) > limits.max_bytes:
        raise ExtractionFailed("too_large", too_large(len(data), limits))
    with tempfile.NamedTemporaryFile(prefix="debounce-file-", suffix=os.path.splitext(name)[1]) as f:
        f.write(data)
        f.flush()
        return extract_file(f.name, media_type, limits, name=name)
