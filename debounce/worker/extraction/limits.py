"""What an extraction may spend, what it gives back, and how it fails.

An extraction turns a file's bytes into Markdown text in a throwaway child process
(:mod:`debounce.worker.extraction.isolate`). :class:`ExtractionLimits` bounds it (bytes in,
characters out, wall-clock seconds, address space, cells of a table); :class:`Extracted` is its
text; :class:`ExtractionFailed` is a clear, per-file reason ("no text layer (scanned)", "too
large: 212 MB > 64 MB", "extraction timed out after 60 s", "encrypted", "crashed (signal 6)")
that the file's document records. Nothing here raises past the file: the worker stays up.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from debounce.config import DEFAULT_FILE_MEDIA_TYPES, Settings

__all__ = [
    "DEFAULT_MEDIA_TYPES",
    "MEDIA_FORMATS",
    "Extracted",
    "ExtractionFailed",
    "ExtractionLimits",
    "megabytes",
    "too_large",
]

#: The media types extracted by default, and the format each is read as. Images, audio and
#: video are never extracted (no OCR, no transcription): their documents carry metadata only.
MEDIA_FORMATS: dict[str, str] = {
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/csv": "csv",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/plain": "text",
    "text/html": "html",
}

#: The default of ``DEBOUNCE_FILE_MEDIA_TYPES``: every media type of :data:`MEDIA_FORMATS`.
DEFAULT_MEDIA_TYPES: tuple[str, ...] = DEFAULT_FILE_MEDIA_TYPES
assert set(DEFAULT_MEDIA_TYPES) == set(MEDIA_FORMATS)


def megabytes(size: int) -> str:
    """``size`` (bytes) as people read it in a reason: ``212 MB``, ``0.5 MB`` (10^6 bytes)."""
    mb = size / 1_000_000
    return f"{mb:.0f} MB" if mb >= 10 or mb.is_integer() else f"{mb:.1f} MB"


def too_large(size: int, limits: ExtractionLimits) -> str:
    """The reason of a file of ``size`` bytes over ``limits.max_bytes``: ``too large: 212 MB >
    64 MB``."""
    return f"too large: {megabytes(size)} > {megabytes(limits.max_bytes)}"


@dataclass(frozen=True)
class ExtractionLimits:
    """The bounds of one extraction.

    ``max_bytes``: largest file read (bytes, counted on the bytes streamed, never on a declared
    length). ``max_chars``: characters of Markdown kept; past it the text ends with a
    "truncated" mark. ``timeout_seconds``: wall-clock seconds the child may run before it is
    killed. ``memory_bytes``: address space the child may add to what it starts with
    (``RLIMIT_AS``; Linux). ``max_cells``: cells of a spreadsheet or CSV read, over all sheets.
    ``media_types``: the media types extracted (:data:`MEDIA_FORMATS` says how); others get
    metadata only. ``max_zip_*`` guard zip-based formats (DOCX, PPTX, XLSX) against
    decompression bombs before any library opens them: members, uncompressed bytes in total,
    and the ratio of a member's uncompressed to compressed size (for members over 1 MiB).
    """

    max_bytes: int = 64 * 1_000_000
    max_chars: int = 1_000_000
    timeout_seconds: float = 60.0
    memory_bytes: int = 1024 * 1024 * 1024
    max_cells: int = 1_000_000
    media_types: frozenset[str] = field(default_factory=lambda: frozenset(DEFAULT_MEDIA_TYPES))
    max_zip_members: int = 10_000
    max_zip_total_bytes: int = 512 * 1024 * 1024
    max_zip_ratio: float = 200.0

    @classmethod
    def from_settings(cls, settings: Settings) -> ExtractionLimits:
        """The limits the service's settings set (``DEBOUNCE_FILE_*``)."""
        return cls(
            max_bytes=settings.file_max_bytes,
            max_chars=settings.file_max_characters,
            timeout_seconds=settings.file_timeout_seconds,
            memory_bytes=settings.file_memory_mb * 1024 * 1024,
            media_types=frozenset(settings.file_media_types),
        )

    def format_of(self, media_type: str) -> str | None:
        """The format ``media_type`` is extracted as (``pdf``, ``docx``, ...), or ``None`` when
        it is not extracted (not in ``media_types``, or no format reads it)."""
        base = media_type.split(";", 1)[0].strip().lower()
        return MEDIA_FORMATS.get(base) if base in self.media_types else None


@dataclass(frozen=True)
class Extracted:
    """A file's text: ``markdown`` (ends with a "truncated" mark when ``truncated``),
    ``pages`` (PDF pages, slides, sheets; 0 when the format has none), ``format`` read as,
    ``child_peak_bytes`` (the child's peak resident memory, bytes) and ``seconds`` (wall clock,
    child start to result)."""

    markdown: str
    truncated: bool
    pages: int
    format: str
    child_peak_bytes: int = 0
    seconds: float = 0.0


class ExtractionFailed(Exception):
    """A file whose text cannot be had, for a clear ``reason`` people read (the file document's
    metadata, the dashboard). ``code`` is stable for programs: ``too_large``, ``timeout``,
    ``crashed``, ``out_of_memory``, ``encrypted``, ``no_text``, ``zip_bomb``, ``xml_entities``,
    ``malformed``, ``undecodable``, ``not_extracted``. The same bytes fail the same way: a
    failed extraction is not retried until the content changes."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
