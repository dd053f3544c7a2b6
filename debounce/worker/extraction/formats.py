"""File bytes to Markdown, one reader per format. Runs only in the extraction's child process
(:mod:`debounce.worker.extraction.isolate`), whose memory and time are bounded: a reader may
crash or hang there without harming the worker.

PDF: pypdfium2 (PDFium; Apache-2.0/BSD-3), pypdf (BSD-3) when PDFium cannot open the file.
CSV: the standard library's ``csv``; text encodings by charset-normalizer (MIT). HTML:
markdownify (MIT) over BeautifulSoup. DOCX, PPTX, XLSX: :mod:`debounce.worker.extraction.office`.
"""

from __future__ import annotations

import csv
import io
import logging
from collections.abc import Callable

import bs4
import markdownify
import pypdf
import pypdfium2 as pdfium

from debounce.worker.extraction import office
from debounce.worker.extraction.limits import ExtractionFailed, ExtractionLimits
from debounce.worker.extraction.output import Out, decode, table

__all__ = ["READERS", "read"]

# pypdf logs every recoverable flaw of a malformed file as a warning.
logging.getLogger("pypdf").setLevel(logging.ERROR)


def _page_text(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "").strip()


def _pdfium(path: str, out: Out) -> bool:
    """Pages' text by PDFium; returns whether any page had text. Raises ``pdfium.PdfiumError``
    when PDFium cannot open the file."""
    doc = pdfium.PdfDocument(path)
    try:
        had_text = False
        for index in range(len(doc)):
            page = doc[index]
            try:
                textpage = page.get_textpage()
                try:
                    text = _page_text(textpage.get_text_bounded())
                finally:
                    textpage.close()
            finally:
                page.close()
            out.pages += 1
            had_text = had_text or bool(text)
            if not out.add(text):
                break
        return had_text
    finally:
        doc.close()


def _pypdf(path: str, out: Out) -> bool:
    """Pages' text by pypdf (the fallback); returns whether any page had text."""
    try:
        reader = pypdf.PdfReader(path, strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            raise ExtractionFailed("encrypted", "encrypted (a password is needed)")
        had_text = False
        for page in reader.pages:
            text = _page_text(page.extract_text() or "")
            out.pages += 1
            had_text = had_text or bool(text)
            if not out.add(text):
                break
        return had_text
    except ExtractionFailed:
        raise
    except Exception as exc:  # pypdf raises many kinds on a malformed file
        raise ExtractionFailed("malformed", f"not a readable PDF ({type(exc).__name__}: {exc})") from None


def pdf(path: str, out: Out, limits: ExtractionLimits) -> None:
    """A PDF's text, page after page (PDFium; pypdf when PDFium cannot open it).

    Raises:
        ExtractionFailed: ``encrypted``, ``no_text`` (pages without a text layer: scanned),
            ``malformed``.
    """
    try:
        had_text = _pdfium(path, out)
    except pdfium.PdfiumError as exc:
        if "password" in str(exc).lower():
            raise ExtractionFailed("encrypted", "encrypted (a password is needed)") from None
        out.blocks.clear()
        out.size, out.pages, out.truncated = 0, 0, False
        had_text = _pypdf(path, out)
    if not had_text:
        raise ExtractionFailed("no_text", f"no text layer (scanned): {out.pages} page(s) of images")


def _read_text(path: str, limits: ExtractionLimits) -> str:
    with open(path, "rb") as f:
        return decode(f.read(limits.max_bytes + 1))


def text(path: str, out: Out, limits: ExtractionLimits) -> None:
    """Plain text, its encoding detected, as paragraphs (Markdown in it is read as such)."""
    for paragraph in _read_text(path, limits).replace("\r\n", "\n").split("\n\n"):
        if not out.add(paragraph):
            break


def markdown(path: str, out: Out, limits: ExtractionLimits) -> None:
    """Markdown, kept as written."""
    text(path, out, limits)


def csv_table(path: str, out: Out, limits: ExtractionLimits) -> None:
    """A CSV as one GFM table (the first row its header), at most ``max_cells`` cells; the
    delimiter sniffed from the first 64 kB."""
    content = _read_text(path, limits)
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(content[:65536], ",;\t|")
    except csv.Error:
        dialect = csv.excel
    rows: list[list[str]] = []
    cells = 0
    cut = False
    try:
        for row in csv.reader(io.StringIO(content), dialect):
            cells += len(row)
            if cells > limits.max_cells:
                cut = True
                break
            rows.append(row)
    except csv.Error as exc:
        raise ExtractionFailed("malformed", f"not a readable CSV ({exc})") from None
    out.pages = 1
    if out.add(table(rows)) and cut:
        out.cut(f"{limits.max_cells:,} cells")


def html(path: str, out: Out, limits: ExtractionLimits) -> None:
    """HTML as Markdown (markdownify: ATX headings, lists, tables); scripts, styles and
    templates dropped."""
    soup = bs4.BeautifulSoup(_read_text(path, limits), "html.parser")
    for tag in soup(["script", "style", "noscript", "template", "iframe", "object"]):
        tag.decompose()
    converted = markdownify.MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(soup)
    for block in converted.split("\n\n"):
        if not out.add(block):
            break


#: The reader of each format (:data:`~debounce.worker.extraction.limits.MEDIA_FORMATS`).
READERS: dict[str, Callable[[str, Out, ExtractionLimits], None]] = {
    "pdf": pdf,
    "docx": office.docx_file,
    "pptx": office.pptx_file,
    "xlsx": office.xlsx_file,
    "csv": csv_table,
    "markdown": markdown,
    "text": text,
    "html": html,
}


def read(path: str, fmt: str, limits: ExtractionLimits) -> Out:
    """The Markdown of the file at ``path`` read as ``fmt``.

    Raises:
        ExtractionFailed: the file's reason; ``malformed`` for any error a reader did not name.
        MemoryError: past the child's address-space limit.
    """
    out = Out(limits.max_chars)
    try:
        READERS[fmt](path, out, limits)
    except (ExtractionFailed, MemoryError):
        raise
    except Exception as exc:
        reason = f"not a readable {fmt.upper()} ({type(exc).__name__}: {exc})"
        raise ExtractionFailed("malformed", reason) from None
    return out
