"""Office Open XML files to Markdown: DOCX (python-docx, MIT), PPTX (python-pptx, MIT), XLSX
(openpyxl, MIT: ``read_only=True, data_only=True``, streamed, at most ``max_cells`` cells).

Each file passes :func:`~debounce.worker.extraction.zipguard.check_zip` first (decompression
bombs, DTDs); the libraries parse XML with entities off. Runs in the extraction's child process.
"""

from __future__ import annotations

import re

import docx
import openpyxl
import pptx
from docx.table import Table as DocxTable
from docx.text.paragraph import Paragraph

from debounce.worker.extraction.limits import ExtractionLimits
from debounce.worker.extraction.output import Out, table
from debounce.worker.extraction.zipguard import check_zip

__all__ = ["docx_file", "pptx_file", "xlsx_file"]

_HEADING = re.compile(r"^Heading (\d)$")


def _paragraph(paragraph: Paragraph) -> str:
    text = paragraph.text.strip()
    if not text:
        return ""
    style = paragraph.style.name if paragraph.style is not None and paragraph.style.name else ""
    if style == "Title":
        return f"# {text}"
    if match := _HEADING.match(style):
        return f"{'#' * min(int(match.group(1)), 6)} {text}"
    if style.startswith("List Bullet"):
        return f"- {text}"
    if style.startswith("List Number"):
        return f"1. {text}"
    return text


def docx_file(path: str, out: Out, limits: ExtractionLimits) -> None:
    """A Word document's headings (``Title``, ``Heading N``), list items, paragraphs and
    tables, in the body's order."""
    check_zip(path, limits)
    document = docx.Document(path)
    pending: list[str] = []  # consecutive list items form one block
    for block in document.iter_inner_content():
        if isinstance(block, Paragraph):
            line = _paragraph(block)
            if line.startswith(("- ", "1. ")):
                pending.append(line)
                continue
            rendered = line
        else:
            assert isinstance(block, DocxTable)
            rendered = table([cell.text for cell in row.cells] for row in block.rows)
        if pending and not out.add("\n".join(pending)):
            return
        pending = []
        if not out.add(rendered):
            return
    out.add("\n".join(pending))


def pptx_file(path: str, out: Out, limits: ExtractionLimits) -> None:
    """A presentation, slide after slide: ``## Slide N: title``, the text of its shapes, its
    tables, and its speaker notes as a quote."""
    check_zip(path, limits)
    presentation = pptx.Presentation(path)
    for number, slide in enumerate(presentation.slides, 1):
        out.pages += 1
        title_shape = slide.shapes.title
        title = title_shape.text_frame.text.strip() if title_shape is not None else ""
        blocks = [f"## Slide {number}" + (f": {title}" if title else "")]
        for shape in slide.shapes:
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            if shape.has_text_frame:
                lines = [p.text.strip() for p in shape.text_frame.paragraphs]
                blocks.append("\n".join(line for line in lines if line))
            elif getattr(shape, "has_table", False) and shape.has_table:
                blocks.append(table([cell.text for cell in row.cells] for row in shape.table.rows))
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            if notes:
                blocks.append("\n".join(f"> {line}" for line in notes.splitlines()))
        for block in blocks:
            if not out.add(block):
                return


def xlsx_file(path: str, out: Out, limits: ExtractionLimits) -> None:
    """A workbook, sheet after sheet: ``## name`` and a GFM table of its values (formulas'
    cached results, as Excel saved them), streamed; at most ``max_cells`` cells over all
    sheets, counted as the library yields them (a sheet that declares a billion cells costs
    only what is read before the cap)."""
    check_zip(path, limits)
    # A file object: openpyxl refuses a path whose suffix is not an Excel one.
    with open(path, "rb") as f:
        _sheets(openpyxl.load_workbook(f, read_only=True, data_only=True), out, limits)


def _sheets(workbook: openpyxl.Workbook, out: Out, limits: ExtractionLimits) -> None:
    try:
        cells = 0
        for sheet in workbook.worksheets:
            out.pages += 1
            rows: list[tuple[object, ...]] = []
            cut = False
            for row in sheet.iter_rows(values_only=True):
                cells += len(row)
                if cells > limits.max_cells:
                    cut = True
                    break
                rows.append(row)
            if not out.add(f"## {sheet.title}\n\n{table(rows)}"):
                return
            if cut:
                out.cut(f"{limits.max_cells:,} cells")
                return
    finally:
        workbook.close()
