"""Zip-based formats (DOCX, PPTX, XLSX) checked before a library opens them.

A zip's declared sizes are written by whoever made the file, so they are not trusted: every
member is decompressed in 1 MiB chunks with running counts, and the check stops at the first
limit crossed (members, a member's or the total uncompressed bytes, the compression ratio of a
member over 1 MiB). XML members are refused when their prolog declares a DTD: Office Open XML
never has one, and a DTD is how entity expansion ("billion laughs") and external entities get
in. The libraries parse with entities off as well (python-docx, python-pptx: lxml with
``resolve_entities=False``; openpyxl: defusedxml when installed); this check holds whatever
they do. Runs in the extraction's child process, under its memory limit.
"""

from __future__ import annotations

import re
import zipfile

from debounce.worker.extraction.limits import ExtractionFailed, ExtractionLimits, megabytes

__all__ = ["check_zip"]

_CHUNK = 1024 * 1024
#: Members smaller than this are not held to the ratio (small XML parts compress very well).
_RATIO_FLOOR = 1024 * 1024
#: How far into an XML member its prolog (declaration, comments, DOCTYPE) may reach.
_PROLOG_BYTES = 64 * 1024
_DOCTYPE = re.compile(rb"<!DOCTYPE|<!ENTITY", re.IGNORECASE)


def _prolog_has_dtd(head: bytes) -> bool:
    """Whether the bytes before the first element of an XML document declare a DTD (or any
    entity). ``head`` may be UTF-16; decoded leniently."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        head = head.decode("utf-16", errors="ignore").encode("utf-8")
    return _DOCTYPE.search(head) is not None


def check_zip(path: str, limits: ExtractionLimits) -> None:
    """Decompress every member of the zip at ``path`` once, counting, and refuse a bomb.

    Raises:
        ExtractionFailed: ``malformed`` (not a zip, a broken member), ``zip_bomb`` (too many
            members, a member or the total past ``max_zip_total_bytes``, a ratio past
            ``max_zip_ratio``), ``xml_entities`` (an XML member declares a DTD).
    """
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ExtractionFailed("malformed", f"not a readable zip-based file ({exc})") from None
    with archive:
        members = archive.infolist()
        if len(members) > limits.max_zip_members:
            raise ExtractionFailed("zip_bomb", f"zip bomb: {len(members)} members > {limits.max_zip_members}")
        total = 0
        for info in members:
            if info.is_dir():
                continue
            size = 0
            head = b""
            is_xml = info.filename.lower().endswith((".xml", ".rels", ".vml"))
            try:
                with archive.open(info) as member:
                    while chunk := member.read(_CHUNK):
                        size += len(chunk)
                        total += len(chunk)
                        if is_xml and len(head) < _PROLOG_BYTES:
                            head += chunk[: _PROLOG_BYTES - len(head)]
                        if total > limits.max_zip_total_bytes:
                            raise ExtractionFailed(
                                "zip_bomb",
                                f"zip bomb: more than {megabytes(limits.max_zip_total_bytes)} uncompressed",
                            )
                        if size > _RATIO_FLOOR and size > limits.max_zip_ratio * max(info.compress_size, 1):
                            raise ExtractionFailed(
                                "zip_bomb",
                                f"zip bomb: {info.filename} expands more than {limits.max_zip_ratio:g} times",
                            )
            except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
                raise ExtractionFailed("malformed", f"broken zip member {info.filename} ({exc})") from None
            if is_xml and _prolog_has_dtd(_prolog(head)):
                raise ExtractionFailed("xml_entities", f"{info.filename} declares a DTD (entities refused)")


def _prolog(head: bytes) -> bytes:
    """The part of ``head`` before the first element's start tag (``<`` followed by a name
    character), where a DOCTYPE must stand."""
    match = re.search(rb"<[A-Za-z_]", head)
    return head if match is None else head[: match.start()]
