"""Files' text: extraction in a bounded child process (:mod:`.isolate`), the readers of each
format (:mod:`.formats`, :mod:`.office`), the zip guard (:mod:`.zipguard`) and the limits
(:mod:`.limits`). The worker imports :func:`extract_file` / :func:`extract_bytes`; the readers
are imported only by the child processes' fork server."""

from debounce.worker.extraction.isolate import extract_bytes, extract_file, format_of
from debounce.worker.extraction.limits import (
    DEFAULT_MEDIA_TYPES,
    MEDIA_FORMATS,
    Extracted,
    ExtractionFailed,
    ExtractionLimits,
)

__all__ = [
    "DEFAULT_MEDIA_TYPES",
    "MEDIA_FORMATS",
    "Extracted",
    "ExtractionFailed",
    "ExtractionLimits",
    "extract_bytes",
    "extract_file",
    "format_of",
]
