"""Block Kit, legacy attachments and files of a Slack message as Markdown pieces.

Shapes: Block Kit blocks (https://docs.slack.dev/reference/block-kit/blocks), their elements
(https://docs.slack.dev/reference/block-kit/block-elements) and composition objects
(https://docs.slack.dev/reference/block-kit/composition-objects), ``rich_text`` and its
sub-elements (https://docs.slack.dev/reference/block-kit/blocks/rich-text-block), legacy
attachments (https://docs.slack.dev/messaging/formatting-message-text#when-to-use-attachments,
https://docs.slack.dev/legacy/legacy-messaging/legacy-secondary-message-attachments) and file
objects (https://docs.slack.dev/reference/objects/file-object). Each function returns a list of
:class:`~integrations.slack.mrkdwn.Piece` (Markdown plus plain reading), empty when the object
carries nothing to read. Unknown types render their ``text`` object if they have one, else
nothing. What each looks like is in ``docs/slack.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from integrations.slack.files import NOT_FILES, document_of
from integrations.slack.mrkdwn import (
    Names,
    Piece,
    code_block,
    code_span,
    date_text,
    escape_markdown,
    link,
    literal,
    md_of,
    mrkdwn,
    plain_of,
    unescape_slack,
)

__all__ = ["attachment", "block", "file_line", "rich_text"]

_PARA = Piece("\n\n", "\n\n")
_LINE = Piece("\n", "\n")


def _maps(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _join(parts: Sequence[list[Piece]], sep: Piece = _PARA) -> list[Piece]:
    out: list[Piece] = []
    for part in parts:
        if not part:
            continue
        if out:
            out.append(sep)
        out.extend(part)
    return out


def _prefix(pieces: list[Piece], first: str, rest: str | None = None) -> list[Piece]:
    """Prefix every Markdown line (``first`` on the first, ``rest`` on the others)."""
    rest = first if rest is None else rest
    out = [Piece(p.md.replace("\n", "\n" + rest), p.plain) for p in pieces]
    return [Piece(first, ""), *out] if out else []


def _trim(pieces: list[Piece]) -> list[Piece]:
    out = list(pieces)
    while out and not out[-1].md.rstrip("\n"):
        out.pop()
    if out:
        last = out[-1]
        out[-1] = Piece(last.md.rstrip("\n"), last.plain.rstrip("\n"))
    while out and not out[0].md.lstrip("\n"):
        out.pop(0)
    if out:
        first = out[0]
        out[0] = Piece(first.md.lstrip("\n"), first.plain.lstrip("\n"))
    return out


def _text(obj: Any, names: Names) -> list[Piece]:
    """A text object: ``mrkdwn`` is converted, ``plain_text`` is literal (entities unescaped)."""
    if isinstance(obj, str):
        return mrkdwn(obj, names) if obj.strip() else []
    if not isinstance(obj, Mapping) or not isinstance(obj.get("text"), str) or not obj["text"].strip():
        return []
    if obj.get("type") == "plain_text":
        return [literal(unescape_slack(obj["text"]))]
    return mrkdwn(obj["text"], names)


def _plain(obj: Any, names: Names) -> str:
    return plain_of(_text(obj, names)).strip()


# --------------------------------------------------------------------------- elements


def _button(label: str, url: Any = None, *, menu: bool = False) -> Piece:
    shown = label + (" ▾" if menu else "")
    if isinstance(url, str) and url:
        return link(url, shown)
    return Piece("[" + escape_markdown(shown, literal=True).replace("]", "\\]") + "]", shown)


def element(el: Mapping[str, Any], names: Names, *, context: bool = False) -> list[Piece]:
    """An element of ``actions``/``context``/``input`` or a section's ``accessory``: a button
    reads ``[label]`` (a link if it has a ``url``), a menu or picker ``[choice ▾]`` (its
    initial value, else its placeholder), checkboxes and radio buttons list their options with
    ☑/☐ and ◉/○, an image is ``![alt](url)`` (only its alt text inside ``context``). Overflow
    menus and feedback buttons show nothing."""
    kind = el.get("type")
    if kind in ("button", "workflow_button", "icon_button"):
        label = _plain(el.get("text"), names) or str(el.get("accessibility_label") or "")
        return [_button(label, el.get("url"))] if label else []
    if kind == "image":
        alt = str(el.get("alt_text") or "")
        url = el.get("image_url") or (el.get("slack_file") or {}).get("url")
        if context or not isinstance(url, str) or not url:
            return [literal(alt)] if alt else []
        return [Piece(f"![{escape_markdown(alt).replace(']', chr(92) + ']')}]({url})", alt)]
    if kind in ("checkboxes", "radio_buttons"):
        chosen = {str(o.get("value")) for o in _maps(el.get("initial_options"))}
        initial = el.get("initial_option")
        if isinstance(initial, Mapping):
            chosen.add(str(initial.get("value")))
        marks = ("☑ ", "☐ ") if kind == "checkboxes" else ("◉ ", "○ ")
        opts = [
            marks[0 if str(o.get("value")) in chosen else 1] + _plain(o.get("text"), names)
            for o in _maps(el.get("options"))
        ]
        return [literal(", ".join(opts))] if opts else []
    if kind in ("overflow", "feedback_buttons", "context_actions"):
        return []
    if kind == "rich_text_input":
        value = el.get("initial_value")
        return rich_text(value, names) if isinstance(value, Mapping) else []
    shown = _initial(el, names) or _plain(el.get("placeholder"), names)
    if not shown:
        return _text(el.get("text"), names)
    menu = "select" in str(kind) or str(kind).endswith("picker")
    return [_button(shown, menu=menu)]


def _initial(el: Mapping[str, Any], names: Names) -> str:
    option = el.get("initial_option")
    if isinstance(option, Mapping):
        return _plain(option.get("text"), names)
    options = _maps(el.get("initial_options"))
    if options:
        return ", ".join(_plain(o.get("text"), names) for o in options)
    for key, sigil in (("initial_user", "@"), ("initial_channel", "#"), ("initial_conversation", "#")):
        value = el.get(key)
        if isinstance(value, str) and value:
            return sigil + names.get(value, value)
    for key, sigil in (("initial_users", "@"), ("initial_channels", "#"), ("initial_conversations", "#")):
        values = el.get(key)
        if isinstance(values, list) and values:
            return ", ".join(sigil + names.get(str(v), str(v)) for v in values)
    for key in ("initial_date", "initial_time", "initial_value"):
        value = el.get(key)
        if isinstance(value, str | int | float) and str(value):
            return str(value)
    if isinstance(el.get("initial_date_time"), int):
        return date_text(el["initial_date_time"])
    return ""


# --------------------------------------------------------------------------- rich_text


def _styled(pieces: list[Piece], style: Any) -> list[Piece]:
    if not isinstance(style, Mapping) or not pieces:
        return pieces
    marks = (
        ("~~" if style.get("strike") else "")
        + ("**" if style.get("bold") else "")
        + ("*" if style.get("italic") else "")
    )
    if not marks:
        return pieces
    text = md_of(pieces)
    core = text.strip()
    if not core:
        return pieces
    lead, trail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
    return [Piece(f"{lead}{marks}{core}{marks[::-1]}{trail}", plain_of(pieces))]


def _emoji(el: Mapping[str, Any]) -> Piece:
    name = str(el.get("name") or "")
    code = el.get("unicode")
    if isinstance(code, str) and code:
        try:
            chars = "".join(chr(int(part, 16)) for part in code.split("-"))
        except ValueError:
            chars = ""
        tone = el.get("skin_tone")
        if chars and isinstance(tone, int) and 2 <= tone <= 6 and "-1f3f" not in code:
            chars += chr(0x1F3FB + tone - 2)
        if chars:
            return Piece(chars, chars)
    return Piece(f":{name}:", f":{name}:") if name else Piece("", "")


def _inline_one(el: Mapping[str, Any], names: Names) -> list[Piece]:
    kind = el.get("type")
    style = el.get("style")
    if kind == "text":
        text = str(el.get("text") or "")
        if isinstance(style, Mapping) and style.get("code"):
            body = text.strip()
            if not body:
                return [Piece(text, text)]
            lead, trail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
            return _styled([Piece(lead, lead), code_span(body), Piece(trail, trail)], style)
        return _styled([literal(text)], style)
    if kind == "link":
        url = str(el.get("url") or "")
        label = el.get("text") if isinstance(el.get("text"), str) else None
        return _styled([link(url, label)], style) if url else []
    if kind == "emoji":
        return [_emoji(el)]
    ident, sigil = {
        "user": (el.get("user_id"), "@"),
        "usergroup": (el.get("usergroup_id"), "@"),
        "channel": (el.get("channel_id"), "#"),
        "team": (el.get("team_id"), "@"),
        "broadcast": (el.get("range"), "@"),
    }.get(str(kind), (None, ""))
    if isinstance(ident, str) and ident:
        return _styled([literal(sigil + names.get(ident, ident))], style)
    if kind == "date":
        shown = date_text(el.get("timestamp"), el.get("fallback"), el.get("format"))
        target = el.get("url")
        return _styled([link(target, shown) if isinstance(target, str) and target else literal(shown)], style)
    if kind == "color":
        return [literal(str(el.get("value") or ""))]
    other = el.get("text")
    return [literal(other)] if isinstance(other, str) and other else []


def _inline(elements: Any, names: Names) -> list[Piece]:
    merged: list[Mapping[str, Any]] = []
    for el in _maps(elements):
        prev = merged[-1] if merged else None
        if (
            prev is not None
            and el.get("type") == "text"
            and prev.get("type") == "text"
            and (el.get("style") or {}) == (prev.get("style") or {})
        ):
            merged[-1] = {**prev, "text": str(prev.get("text") or "") + str(el.get("text") or "")}
        else:
            merged.append(el)
    return [p for el in merged for p in _inline_one(el, names)]


def _list(el: Mapping[str, Any], names: Names, widths: dict[int, int]) -> list[Piece]:
    indent = el.get("indent") if isinstance(el.get("indent"), int) else 0
    assert isinstance(indent, int)
    offset = el.get("offset") if isinstance(el.get("offset"), int) else 0
    assert isinstance(offset, int)
    ordered = el.get("style") == "ordered"
    pad = " " * sum(widths.get(level, 2) for level in range(indent))
    items: list[list[Piece]] = []
    for i, section in enumerate(_maps(el.get("elements"))):
        marker = f"{offset + i + 1}. " if ordered else "- "
        widths[indent] = len(marker)
        for deeper in [k for k in widths if k > indent]:
            del widths[deeper]
        body = _trim(_inline(section.get("elements"), names))
        shown = marker if ordered else "• "
        item = _prefix(body, pad + marker, pad + " " * len(marker))
        items.append([Piece(item[0].md, "  " * indent + shown), *item[1:]] if item else [])
    return _join(items, _LINE)


def _raw(elements: Any, names: Names) -> str:
    """Preformatted content: what Slack shows, no Markdown (a link shows its text or URL)."""
    out = []
    for el in _maps(elements):
        if el.get("type") == "text":
            out.append(str(el.get("text") or ""))
        elif el.get("type") == "link":
            out.append(str(el.get("text") or el.get("url") or ""))
        else:
            out.append(plain_of(_inline_one(el, names)))
    return "".join(out)


def rich_text(blk: Mapping[str, Any], names: Names) -> list[Piece]:
    """A ``rich_text`` block: sections as paragraphs (text styles as ``**bold**``, ``*italic*``,
    ``~~strike~~``, `` `code` ``; mentions ``@name``/``#name``; emoji as Unicode when Slack gives
    the code point), lists as ``-``/``1.`` items nested by ``indent`` (numbering from
    ``offset``), quotes as ``>`` lines, preformatted text as a fenced block."""
    parts: list[list[Piece]] = []
    widths: dict[int, int] = {}
    previous_list = False
    for el in _maps(blk.get("elements")):
        kind = el.get("type")
        if kind == "rich_text_list":
            lines = _list(el, names, widths)
            if previous_list and parts and lines:
                parts[-1] = [*parts[-1], _LINE, *lines]
            else:
                parts.append(lines)
            previous_list = True
            continue
        previous_list = False
        widths.clear()
        if kind == "rich_text_section":
            parts.append(_trim(_inline(el.get("elements"), names)))
        elif kind == "rich_text_quote":
            parts.append(_prefix(_trim(_inline(el.get("elements"), names)), "> "))
        elif kind == "rich_text_preformatted":
            text = _raw(el.get("elements"), names).strip("\n")
            parts.append([code_block(text)] if text.strip() else [])
    return _join(parts)


# --------------------------------------------------------------------------- blocks


def _image(url: Any, alt: str, title: str = "") -> list[Piece]:
    parts: list[list[Piece]] = [[literal(title)]] if title and title != alt else []
    if isinstance(url, str) and url:
        label = escape_markdown(alt).replace("[", "\\[").replace("]", "\\]")
        parts.append([Piece(f"![{label}]({url})", alt)])
    elif alt:
        parts.append([Piece("_(image: ", ""), literal(alt), Piece(")_", "")])
    return _join(parts)


def _fields(fields: list[list[Piece]]) -> list[Piece]:
    return _join([_prefix(_trim(f), "- ", "  ") for f in fields if f], _LINE)


def _table(blk: Mapping[str, Any], names: Names) -> list[Piece]:
    rows: list[list[str]] = []
    for row in blk.get("rows") or []:
        cells = []
        for cell in _maps(row):
            if cell.get("type") == "rich_text":
                md = md_of(rich_text(cell, names))
            else:
                md = escape_markdown(str(cell.get("text") or cell.get("value") or ""), literal=True)
            cells.append(md.replace("\n", " ").replace("|", "\\|"))
        rows.append(cells)
    if not rows:
        return []
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    lines = ["| " + " | ".join(r) + " |" for r in rows]
    lines.insert(1, "|" + " --- |" * width)
    plain = "\n".join(" ".join(c for c in r if c) for r in rows)
    return [Piece("\n".join(lines), plain)]


def block(blk: Mapping[str, Any], names: Names) -> list[Piece]:
    """One Block Kit block as Markdown (see ``docs/slack.md`` for each type's look)."""
    kind = blk.get("type")
    if kind == "rich_text":
        return rich_text(blk, names)
    if kind == "section":
        parts = [_text(blk.get("text"), names), _fields([_text(f, names) for f in _maps(blk.get("fields"))])]
        accessory = blk.get("accessory")
        if isinstance(accessory, Mapping):
            parts.append(element(accessory, names))
        return _join(parts)
    if kind == "header":
        text = _text(blk.get("text"), names)
        return [Piece("### ", ""), *text] if text else []
    if kind == "context":
        items = [
            element(e, names, context=True)
            if e.get("type") not in ("mrkdwn", "plain_text")
            else _text(e, names)
            for e in _maps(blk.get("elements"))
        ]
        return _join(items, Piece(" · ", " · "))
    if kind == "divider":
        return [Piece("---", "")]
    if kind == "image":
        url = blk.get("image_url") or (blk.get("slack_file") or {}).get("url")
        return _image(url, str(blk.get("alt_text") or ""), _plain(blk.get("title"), names))
    if kind == "actions":
        return _join([element(e, names) for e in _maps(blk.get("elements"))], Piece(" · ", " · "))
    if kind == "input":
        label = _text(blk.get("label"), names)
        el = blk.get("element")
        value = element(el, names) if isinstance(el, Mapping) else []
        return _join([label, value], Piece(": ", ": ")) if label else value
    if kind == "file":
        ident = str(blk.get("external_id") or blk.get("file_id") or "")
        return [Piece("_(file: ", ""), literal(ident), Piece(")_", "")] if ident else []
    if kind == "video":
        title = _plain(blk.get("title"), names) or str(blk.get("alt_text") or "")
        url = blk.get("title_url") or blk.get("video_url")
        head = [link(url, title)] if isinstance(url, str) and url else [literal(title)]
        return _join([head if title else [], _text(blk.get("description"), names)])
    if (
        kind == "markdown"
    ):  # already Markdown (https://docs.slack.dev/reference/block-kit/blocks/markdown-block)
        source = str(blk.get("text") or "").strip()
        return [Piece(source, source)] if source else []
    if kind == "table":
        return _table(blk, names)
    if kind in ("container", "card", "carousel", "plan"):
        head = (
            _text(blk.get("title"), names)
            if not isinstance(blk.get("title"), str)
            else [literal(blk["title"])]
        )
        children = [
            block(b, names) for b in _maps(blk.get("child_blocks") or blk.get("elements") or blk.get("tasks"))
        ]
        rest = [
            _text(blk.get("subtitle"), names),
            _text(blk.get("body"), names),
            _join([element(e, names) for e in _maps(blk.get("actions"))], Piece(" ", " ")),
        ]
        return _join([[Piece("**", ""), *head, Piece("**", "")] if head else [], *rest, *children])
    if kind == "task_card":
        done = "x" if blk.get("status") == "complete" else " "
        parts = [[Piece(f"- [{done}] ", ""), literal(str(blk.get("title") or ""))]]
        for key in ("details", "output"):
            if isinstance(blk.get(key), Mapping):
                parts.append(_prefix(rich_text(blk[key], names), "  "))
        return _join(parts, _LINE)
    if kind == "alert":
        return _text(blk.get("text"), names)
    return _text(blk.get("text"), names)


# --------------------------------------------------------------------------- attachments, files


def attachment(att: Mapping[str, Any], names: Names) -> list[Piece]:
    """A legacy attachment (unfurl, app attachment, shared message): ``pretext`` above, then as
    a quote (Slack draws it with a bar): ``author``, ``**[title](title_link)**``, ``text``, its
    ``blocks``, ``fields`` as ``- **title**: value`` items, legacy ``actions`` as buttons,
    ``footer``. ``fallback`` only when none of these exist."""
    inner: list[list[Piece]] = []
    author = str(att.get("author_name") or att.get("service_name") or "")
    if author:
        link_to = att.get("author_link")
        inner.append([link(link_to, author) if isinstance(link_to, str) and link_to else literal(author)])
    title = _text(att.get("title"), names)
    if title:
        url = att.get("title_link")
        head = [link(url, plain_of(title))] if isinstance(url, str) and url else title
        inner.append([Piece("**", ""), *head, Piece("**", "")])
    inner.append(_text(att.get("text"), names))
    inner.append(_join([block(b, names) for b in _maps(att.get("blocks"))]))
    fields = []
    for f in _maps(att.get("fields")):
        name, value = _plain(f.get("title"), names), _text(f.get("value"), names)
        head = [Piece("**", ""), literal(name), Piece("**", ""), Piece(": ", ": ")] if name else []
        fields.append([*head, *value])
    inner.append(_fields(fields))
    inner.append(
        _join(
            [
                [_button(_plain(a.get("text"), names), a.get("url"))]
                for a in _maps(att.get("actions"))
                if _plain(a.get("text"), names)
            ],
            Piece(" ", " "),
        )
    )
    inner.append(_text(att.get("footer"), names))
    body = _join(inner)
    if not body and not att.get("pretext"):
        body = _text(att.get("fallback"), names)
    return _join([_text(att.get("pretext"), names), _prefix(body, "> ")])


def file_line(f: Mapping[str, Any]) -> list[Piece]:
    """A shared file: ``_(file: [name](permalink) · document `file:F1`)_``, naming the file
    document of its text (:func:`~integrations.slack.files.document_of`), so a consumer can
    follow it; nothing for a deleted file (``mode: "tombstone"``) or one hidden by the plan's
    limits."""
    if f.get("mode") in NOT_FILES or f.get("hidden_by_limit"):
        return []
    name = str(f.get("name") or f.get("title") or f.get("id") or "")
    if not name:
        return []
    url = f.get("permalink")
    shown = link(url, name) if isinstance(url, str) and url else literal(name)
    document = document_of(f)
    named = Piece(f" · document `{document}`", "") if document else Piece("", "")
    return [Piece("_(file: ", ""), shown, named, Piece(")_", "")]
