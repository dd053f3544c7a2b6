"""The Markdown an extraction writes, capped at a number of characters, and its helpers."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import charset_normalizer

from debounce.worker.extraction.limits import ExtractionFailed

__all__ = ["Out", "decode", "table"]


class Out:
    """Blocks of Markdown (paragraphs, headings, tables) joined by blank lines, at most
    ``max_chars`` characters; a block that does not fit is cut and the text marked truncated.
    ``pages`` counts what the format calls pages (PDF pages, slides, sheets)."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.blocks: list[str] = []
        self.size = 0
        self.truncated = False
        self.pages = 0
        self.cut_at = ""

    def cut(self, what: str) -> None:
        """Mark the text truncated by another cap than characters: ``what`` names it
        (``"1,000,000 cells"``)."""
        self.truncated = True
        self.cut_at = what

    @property
    def full(self) -> bool:
        """Whether nothing more is kept."""
        return self.truncated

    def add(self, block: str) -> bool:
        """Keep ``block`` (stripped; empty blocks are dropped). Returns ``False`` once the cap
        is reached, and the caller stops reading."""
        block = block.strip("\n")
        if self.truncated:
            return False
        if not block.strip():
            return True
        cost = len(block) + (2 if self.blocks else 0)
        if self.size + cost > self.max_chars:
            room = self.max_chars - self.size - (2 if self.blocks else 0)
            if room > 0:
                self.blocks.append(block[:room])
            self.truncated = True
            return False
        self.blocks.append(block)
        self.size += cost
        return True

    def markdown(self) -> str:
        """The text, with ``_(truncated at N characters)_`` last when it was cut."""
        text = "\n\n".join(self.blocks)
        if self.truncated:
            text += f"\n\n_(truncated at {self.cut_at or f'{self.max_chars:,} characters'})_"
        return text


def decode(data: bytes) -> str:
    """``data`` as text: UTF-8 (with or without a BOM) when it is, else the encoding
    charset-normalizer finds most likely.

    Raises:
        ExtractionFailed: ``undecodable`` (no encoding reads it as text).
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    best = charset_normalizer.from_bytes(data).best()
    if best is None:
        raise ExtractionFailed("undecodable", "text in an unknown encoding (or not text)")
    return str(best)


def _cell(value: object) -> str:
    text = "" if value is None else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r\n", " ").replace("\n", " ").strip()


def table(rows: Iterable[Sequence[object]]) -> str:
    """A GFM table of ``rows`` (the first is the header), trailing empty columns and empty rows
    dropped; ``""`` when nothing is left."""
    cells = [[_cell(v) for v in row] for row in rows]
    cells = [row for row in cells if any(row)]
    if not cells:
        return ""
    width = max(max((i + 1 for i, v in enumerate(row) if v), default=0) for row in cells)
    cells = [(row + [""] * width)[:width] for row in cells]
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + "---|" * width]
    lines += ["| " + " | ".join(row) + " |" for row in cells[1:]]
    return "\n".join(lines)
