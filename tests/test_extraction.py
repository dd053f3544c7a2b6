"""Files' text, extracted in a bounded child process (debounce/worker/extraction/, issue 39).

Every file here is real, written in the test by the library that writes that format (pypdf,
Pillow, python-docx, python-pptx, openpyxl) or by hand for the hostile ones; each ends as its
text or as a clear per-file failure, and the process that asked is alive and extracts the next
file.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

import docx
import pptx
import pytest
from PIL import Image
from pypdf import PdfWriter

from debounce.config import Settings
from debounce.worker.extraction import (
    Extracted,
    ExtractionFailed,
    ExtractionLimits,
    extract_bytes,
    extract_file,
    format_of,
)
from standins.sample_files import spreadsheet, text_pdf

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
LIMITS = ExtractionLimits(timeout_seconds=60)


def failure(data: bytes, media_type: str, limits: ExtractionLimits = LIMITS) -> ExtractionFailed:
    with pytest.raises(ExtractionFailed) as caught:
        extract_bytes(data, media_type, limits)
    return caught.value


def still_alive() -> None:
    """The parent extracts the next file after whatever the last one did."""
    result = extract_bytes(text_pdf([["still here"]]), PDF, LIMITS)
    assert result.markdown == "still here"


# -- the formats ---------------------------------------------------------------------------


def test_text_pdf_pages_in_order() -> None:
    data = text_pdf([["Policy (v2)", "Travel is reimbursed."], ["Page two: café"]])
    result = extract_bytes(data, PDF, LIMITS)
    assert result == Extracted(
        markdown="Policy (v2)\nTravel is reimbursed.\n\nPage two: café",
        truncated=False,
        pages=2,
        format="pdf",
        child_peak_bytes=result.child_peak_bytes,
        seconds=result.seconds,
    )
    assert result.child_peak_bytes > 0


def test_scanned_pdf_says_it_has_no_text() -> None:
    image = Image.new("RGB", (200, 100), "white")
    out = io.BytesIO()
    image.save(out, "PDF")
    caught = failure(out.getvalue(), PDF)
    assert (caught.code, caught.reason) == ("no_text", "no text layer (scanned): 1 page(s) of images")


def test_encrypted_pdf() -> None:
    writer = PdfWriter(clone_from=io.BytesIO(text_pdf([["secret plans"]])))
    writer.encrypt(user_password="hunter2", algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    caught = failure(out.getvalue(), PDF)
    assert (caught.code, caught.reason) == ("encrypted", "encrypted (a password is needed)")


def test_pdf_with_an_empty_user_password_is_read() -> None:
    writer = PdfWriter(clone_from=io.BytesIO(text_pdf([["open to all"]])))
    writer.encrypt(user_password="", owner_password="owner", algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    assert extract_bytes(out.getvalue(), PDF, LIMITS).markdown == "open to all"


def test_truncated_pdf_is_a_clear_failure() -> None:
    data = text_pdf([[f"page {n}"] for n in range(1, 6)])
    for cut in (data[: data.index(b"xref")], data[:200]):  # no trailer: no catalog to start at
        caught = failure(cut, PDF)
        assert caught.code == "malformed"
        assert caught.reason.startswith("not a readable PDF ("), caught.reason


def test_docx_headings_lists_tables() -> None:
    document = docx.Document()
    document.add_heading("Onboarding", level=1)
    document.add_paragraph("Welcome aboard.")
    document.add_paragraph("laptop", style="List Bullet")
    document.add_paragraph("badge", style="List Bullet")
    grid = document.add_table(rows=2, cols=2)
    grid.cell(0, 0).text, grid.cell(0, 1).text = "who", "when"
    grid.cell(1, 0).text, grid.cell(1, 1).text = "IT", "day 1"
    out = io.BytesIO()
    document.save(out)
    result = extract_bytes(out.getvalue(), DOCX, LIMITS)
    assert result.markdown == (
        "# Onboarding\n\nWelcome aboard.\n\n- laptop\n- badge\n\n| who | when |\n|---|---|\n| IT | day 1 |"
    )


def test_pptx_slides_and_notes() -> None:
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    assert slide.shapes.title is not None
    slide.shapes.title.text = "Q3 plan"
    slide.placeholders[1].text_frame.text = "Ship files"
    slide.notes_slide.notes_text_frame.text = "Say it slowly"
    out = io.BytesIO()
    deck.save(out)
    result = extract_bytes(out.getvalue(), PPTX, LIMITS)
    assert result.markdown == "## Slide 1: Q3 plan\n\nShip files\n\n> Say it slowly"
    assert result.pages == 1


def _with_member(
    data: bytes, name: str, replace: dict[bytes, bytes] | None = None, add: tuple[str, bytes] | None = None
) -> bytes:
    """The zip ``data`` with member ``name``'s bytes edited, or one member added."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            content = source.read(info)
            if info.filename == name and replace:
                for old, new in replace.items():
                    assert old in content, (old, content[:400])
                    content = content.replace(old, new)
            target.writestr(info.filename, content)
        if add is not None:
            target.writestr(add[0], add[1])
    return out.getvalue()


def test_xlsx_formulas_show_their_saved_values() -> None:
    data = spreadsheet(
        {"Q3": [["region", "revenue"], ["north", 10], ["south", 20], ["total", "=SUM(B2:B3)"]]}
    )
    # Excel saves a formula's result beside it; openpyxl writes none: add it as Excel would.
    data = _with_member(
        data, "xl/worksheets/sheet1.xml", {b"<f>SUM(B2:B3)</f><v></v>": b"<f>SUM(B2:B3)</f><v>30</v>"}
    )
    result = extract_bytes(data, XLSX, LIMITS)
    assert result.markdown == (
        "## Q3\n\n| region | revenue |\n|---|---|\n| north | 10 |\n| south | 20 |\n| total | 30 |"
    )


def test_csv_in_latin1() -> None:
    data = "name;city\nJosé;Zürich\nRenée;Besançon\n".encode("latin-1")
    result = extract_bytes(data, "text/csv", LIMITS)
    assert result.markdown == "| name | city |\n|---|---|\n| José | Zürich |\n| Renée | Besançon |"


def test_html_to_markdown_without_scripts() -> None:
    page = (
        b"<html><head><style>p{}</style><script>steal()</script></head><body>"
        b"<h1>Runbook</h1><ul><li>restart</li><li>check</li></ul></body></html>"
    )
    result = extract_bytes(page, "text/html; charset=utf-8", LIMITS)
    assert result.markdown == "# Runbook\n\n- restart\n- check"


def test_text_and_markdown_by_name_when_the_type_says_nothing() -> None:
    limits = LIMITS
    assert format_of("application/octet-stream", "notes.md", limits) == ("text/markdown", "markdown")
    result = extract_bytes(
        "# Notes\n\nshort".encode("utf-16"), "application/octet-stream", limits, name="notes.md"
    )
    assert result.markdown == "# Notes\n\nshort"


# -- the limits ----------------------------------------------------------------------------


def test_too_large_counts_bytes_not_declared_lengths(tmp_path: Path) -> None:
    data = text_pdf([["x"]])
    limits = ExtractionLimits(max_bytes=len(data) - 1)
    caught = failure(data, PDF, limits)
    assert caught.code == "too_large"
    assert re.fullmatch(r"too large: \d+(\.\d)? MB > \d+(\.\d)? MB", caught.reason)
    path = tmp_path / "big.bin"
    path.write_bytes(b"x" * 2_000_001)
    with pytest.raises(ExtractionFailed, match=r"^too large: 2\.0 MB > 1 MB$"):
        extract_file(str(path), "text/plain", ExtractionLimits(max_bytes=1_000_000))


def test_characters_cap_marks_the_text_truncated() -> None:
    data = text_pdf([["a" * 30], ["b" * 30], ["c" * 30]])
    result = extract_bytes(data, PDF, ExtractionLimits(max_chars=40))
    assert result.truncated
    assert result.markdown == "a" * 30 + "\n\n" + "b" * 8 + "\n\n_(truncated at 40 characters)_"


def test_media_types_not_extracted_keep_metadata_only() -> None:
    caught = failure(b"\x89PNG\r\n\x1a\n", "image/png")
    assert (caught.code, caught.reason) == ("not_extracted", "image/png: metadata only (no OCR)")
    heard = failure(b"ID3", "audio/mpeg")
    assert heard.reason == "audio/mpeg: metadata only (no transcription)"
    assert failure(b"\0", "video/mp4").reason == "video/mp4: metadata only (no transcription)"
    limits = ExtractionLimits(media_types=frozenset({"text/plain"}))
    other = failure(text_pdf([["x"]]), PDF, limits)
    assert (other.code, other.reason) == ("not_extracted", "application/pdf: not extracted (metadata only)")


def test_limits_come_from_the_settings() -> None:
    settings = Settings.from_env(
        {
            "DEBOUNCE_FILE_MAX_BYTES": "1000",
            "DEBOUNCE_FILE_MAX_CHARACTERS": "50",
            "DEBOUNCE_FILE_TIMEOUT_SECONDS": "5",
            "DEBOUNCE_FILE_MEMORY_MB": "256",
            "DEBOUNCE_FILE_MEDIA_TYPES": "application/pdf, Text/CSV",
        }
    )
    limits = ExtractionLimits.from_settings(settings)
    assert (limits.max_bytes, limits.max_chars, limits.timeout_seconds, limits.memory_bytes) == (
        1000,
        50,
        5.0,
        256 * 1024 * 1024,
    )
    assert limits.media_types == {"application/pdf", "text/csv"}
    with pytest.raises(ValueError, match="DEBOUNCE_FILE_MEDIA_TYPES must list media types"):
        Settings.from_env({"DEBOUNCE_FILE_MEDIA_TYPES": "pdf"})


def test_timeout_kills_the_child() -> None:
    data = text_pdf([[f"line {n}" for n in range(40)] for _ in range(200)])
    caught = failure(data, PDF, ExtractionLimits(timeout_seconds=0.001))
    assert (caught.code, caught.reason) == ("timeout", "extraction timed out after 0.001 s")
    still_alive()


def test_memory_limit_ends_the_child_not_the_parent() -> None:
    data = text_pdf([[f"line {n}" for n in range(40)] for _ in range(50)])
    caught = failure(data, PDF, ExtractionLimits(memory_bytes=1))
    assert caught.code in ("out_of_memory", "crashed"), caught.reason
    assert re.fullmatch(
        r"out of memory: needed more than 0\.0 MB|crashed \(signal \d+ \w+\)|"
        r"crashed \(exit code \d+\)",
        caught.reason,
    )
    still_alive()


# -- hostile files -------------------------------------------------------------------------


def _docx_bytes() -> bytes:
    document = docx.Document()
    document.add_paragraph("harmless")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_zip_bomb_in_a_docx() -> None:
    bomb = _with_member(_docx_bytes(), "", add=("word/media/bomb.bin", b"\0" * (20 * 1024 * 1024)))
    caught = failure(bomb, DOCX)
    assert (caught.code, caught.reason) == (
        "zip_bomb",
        "zip bomb: word/media/bomb.bin expands more than 200 times",
    )
    total = failure(_docx_bytes(), DOCX, ExtractionLimits(max_zip_total_bytes=10_000))
    assert (total.code, total.reason) == ("zip_bomb", "zip bomb: more than 0.0 MB uncompressed")
    still_alive()


def test_xml_entity_expansion_is_refused() -> None:
    laughs = (
        b'<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol">'
        + b"".join(
            b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;") * 10)
            for i in range(1, 10)
        )
        + b"]>\n"
    )
    declaration = b"<?xml version='1.0' encoding='UTF-8' standalone='yes'?>\n"
    data = _with_member(_docx_bytes(), "word/document.xml", {declaration: laughs})
    caught = failure(data, DOCX)
    assert (caught.code, caught.reason) == (
        "xml_entities",
        "word/document.xml declares a DTD (entities refused)",
    )


def test_xlsx_declaring_a_billion_cells_stops_at_the_cap() -> None:
    data = spreadsheet({"huge": [["a", "b"], [1, 2]]})
    data = _with_member(
        data,
        "xl/worksheets/sheet1.xml",
        {
            b'<dimension ref="A1:B2"/>': b'<dimension ref="A1:XFD1048576"/>',
            b"</sheetData>": b'<row r="1048576"><c r="XFD1048576" t="n"><v>9</v></c></row></sheetData>',
        },
    )
    result = extract_bytes(data, XLSX, ExtractionLimits(max_cells=100_000, timeout_seconds=60))
    assert result.truncated
    assert result.markdown.startswith("## huge\n\n| a | b |\n|---|---|\n| 1 | 2 |")
    assert result.markdown.endswith("_(truncated at 100,000 cells)_")


def test_pdf_with_a_cross_reference_loop() -> None:
    data = text_pdf([["looping"]])
    start = int(re.findall(rb"startxref\s+(\d+)", data)[-1])
    # A trailer whose /Prev points at its own cross-reference table: a parser that follows
    # /Prev naively never ends.
    looped = re.sub(rb"trailer\s*<<", b"trailer\n<< /Prev %d " % start, data)
    result = extract_bytes(looped, PDF, ExtractionLimits(timeout_seconds=20))
    assert result.markdown == "looping"
    # A page tree whose page is its own parent's kid twice over: a cycle.
    cyclic = re.sub(rb"/Kids \[ (\d+) 0 R \]", rb"/Kids [ \1 0 R 1 0 R ]", data, count=1)
    try:
        result = extract_bytes(cyclic, PDF, ExtractionLimits(timeout_seconds=20))
        assert "looping" in result.markdown
    except ExtractionFailed as caught:
        assert caught.code in ("malformed", "no_text", "crashed", "timeout"), caught.reason
    still_alive()


def test_not_a_zip_at_all() -> None:
    caught = failure(b"PK\x03\x04 this is not a zip", XLSX)
    assert caught.code == "malformed"
    assert caught.reason.startswith("not a readable zip-based file")
