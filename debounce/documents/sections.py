"""A document's sections: the parts a consumer can re-embed one by one (issue 40, point 2).

A document's Markdown is cut where a top-level heading starts (an ATX ``#`` or setext heading
at the document's top level, as markdown-it-py's block parser reads the documents' dialect —
CommonMark with GFM tables, as :func:`debounce.contract.markdown.gfm_parser`, without its
inline rules, which change no block and cost ten times the block parse; a ``#`` line inside a
code block or a list item is no heading). A section runs from its heading's first character
to the next heading's first character (the last one to the end); text before the first
heading is a section with an empty heading path. Sections do not nest: a ``##`` heading
under a ``#`` one starts its own section, whose heading path names both.

Each section carries:

- ``id``: stable across edits elsewhere in the document. When the syncer gave the source's own
  identities of the document's parts (``Document.anchors``: Slack gives each message's ``ts``),
  the document is cut there and a section's id is ``"<source id>"`` as given. Otherwise the id
  is derived from the heading path: ``h-`` and the first 16 hex digits of the SHA-256 of the
  path's headings and an ordinal that tells repeated paths apart (the first ``## Notes`` under
  ``# A`` is 0, the second 1). Editing a section's body keeps its id; renaming a heading
  changes the id of its section and of the sections under it (their paths name it); adding or
  removing a section with the *same* path as later ones shifts those later ones' ordinals.
- ``path``: the heading texts from the top level down (the Markdown source of each heading's
  text, trimmed).
- ``start``/``end``: the character range (Python ``str`` indices, ``end`` exclusive) of the
  section in the content.
- ``sha256``: the hex SHA-256 of the section's text (UTF-8): the same text, the same hash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from markdown_it import MarkdownIt

__all__ = ["Section", "split_sections"]


def _block_parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    md.core.ruler.disable(["inline", "text_join"])  # headings' text stays their source
    return md


_PARSER = _block_parser()


@dataclass(frozen=True)
class Section:
    """One section (module docstring): ``id``, heading ``path``, character range
    ``[start, end)`` and the hex SHA-256 of its text."""

    id: str
    path: tuple[str, ...]
    start: int
    end: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        """The section as the read API and the ``documents.sections`` column keep it."""
        return {
            "id": self.id,
            "path": list(self.path),
            "start": self.start,
            "end": self.end,
            "sha256": self.sha256,
        }


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _line_starts(text: str) -> list[int]:
    """Character offset of each line's start (markdown-it's ``map`` counts ``\\n`` lines)."""
    starts = [0]
    at = text.find("\n")
    while at != -1:
        starts.append(at + 1)
        at = text.find("\n", at + 1)
    return starts


def _headings(content: str) -> list[tuple[int, int, str]]:
    """``(offset, level, text)`` of each top-level heading, in order."""
    tokens = _PARSER.parse(content)
    starts = _line_starts(content)
    found: list[tuple[int, int, str]] = []
    for i, token in enumerate(tokens):
        if token.type != "heading_open" or token.level != 0 or token.map is None:
            continue
        inline = tokens[i + 1] if i + 1 < len(tokens) else None
        text = inline.content.strip() if inline is not None and inline.type == "inline" else ""
        line = token.map[0]
        found.append((starts[line] if line < len(starts) else len(content), int(token.tag[1:]), text))
    return found


def _path_id(path: tuple[str, ...], ordinal: int) -> str:
    key = "\x1f".join((*path, str(ordinal)))
    return "h-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def split_sections(content: str, anchors: Sequence[tuple[int, str]] = ()) -> list[Section]:
    """The sections of ``content`` (module docstring), in document order; an empty content has
    none. ``anchors``: ``(character offset, source id)`` where the source's own parts start
    (ascending offsets within the content, unique ids); when given the content is cut there
    (text before the first anchor is a section with id ``"-"``), and each section's path is the
    top-level headings it contains.

    Raises:
        ValueError: anchors out of order, out of range or with a repeated id.
    """
    if not content:
        return []
    if anchors:
        return _anchored(content, anchors)
    heads = _headings(content)
    cuts: list[tuple[int, tuple[str, ...]]] = []
    if not heads or heads[0][0] > 0:
        cuts.append((0, ()))
    stack: list[tuple[int, str]] = []
    for offset, level, text in heads:
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, text))
        cuts.append((offset, tuple(t for _, t in stack)))
    seen: dict[tuple[str, ...], int] = {}
    sections: list[Section] = []
    for n, (start, path) in enumerate(cuts):
        end = cuts[n + 1][0] if n + 1 < len(cuts) else len(content)
        ordinal = seen.get(path, 0)
        seen[path] = ordinal + 1
        sections.append(Section(_path_id(path, ordinal), path, start, end, _sha256(content[start:end])))
    return sections


def _anchored(content: str, anchors: Sequence[tuple[int, str]]) -> list[Section]:
    offsets = [o for o, _ in anchors]
    ids = [i for _, i in anchors]
    if offsets != sorted(set(offsets)) or offsets[0] < 0 or offsets[-1] >= len(content):
        raise ValueError("section anchors must be ascending, unique offsets within the content")
    if len(set(ids)) != len(ids) or "-" in ids:
        raise ValueError("section anchor ids must be unique (and not '-')")
    cuts = list(anchors)
    if offsets[0] > 0:
        cuts.insert(0, (0, "-"))
    heads = _headings(content)
    sections: list[Section] = []
    for n, (start, sid) in enumerate(cuts):
        end = cuts[n + 1][0] if n + 1 < len(cuts) else len(content)
        path = tuple(text for offset, _, text in heads if start <= offset < end)
        sections.append(Section(sid, path, start, end, _sha256(content[start:end])))
    return sections
