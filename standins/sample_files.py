"""Real files the stand-ins serve, the demo attaches and the tests and benchmarks read: a PDF of
text pages (written by pypdf) and a spreadsheet (written by openpyxl). Made on demand, so no
binary file is kept in the repository."""

from __future__ import annotations

import io

import openpyxl
from pypdf import PdfWriter
from pypdf.generic import ContentStream, DecodedStreamObject, DictionaryObject, NameObject

__all__ = ["spreadsheet", "text_pdf"]


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def text_pdf(pages: list[list[str]], *, title: str = "") -> bytes:
    """A PDF with one page per item of ``pages``, each line of text in 11 pt Helvetica (a real
    text layer, as a word processor writes one)."""
    writer = PdfWriter()
    for lines in pages:
        font = DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
                NameObject("/Encoding"): NameObject("/WinAnsiEncoding"),
            }
        )
        page = writer.add_blank_page(612, 792)
        ops = ["BT", "/F1 11 Tf", "14 TL", "56 740 Td"]
        ops += [f"({_escape(line)}) '" for line in lines]
        ops.append("ET")
        stream = DecodedStreamObject()
        stream.set_data("\n".join(ops).encode("cp1252", errors="replace"))
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        page.replace_contents(ContentStream(stream, writer))
    if title:
        writer.add_metadata({"/Title": title})
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def spreadsheet(sheets: dict[str, list[list[object]]]) -> bytes:
    """An XLSX workbook with one sheet per item of ``sheets`` (name -> rows of values; a value
    starting with ``=`` is a formula)."""
    workbook = openpyxl.Workbook()
    first = workbook.active
    assert first is not None
    workbook.remove(first)
    for name, rows in sheets.items():
        sheet = workbook.create_sheet(name)
        for row in rows:
            sheet.append(row)
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()
