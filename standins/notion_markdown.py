"""``GET /v1/pages/{page_id}/markdown`` of the Notion stand-in: a page (or a block's subtree)
as Notion's enhanced Markdown (https://developers.notion.com/reference/retrieve-page-markdown,
format: https://developers.notion.com/guides/data-apis/enhanced-markdown).

The answer is ``{"object": "page_markdown", "id", "markdown", "truncated",
"unknown_block_ids"}``. Children are indented one tab deeper than their parent; callouts,
toggles, columns, tables, files, child pages and mentions are XML-like tags. Only the first
:attr:`NotionMarkdown.markdown_block_limit` blocks (pre-order) of one answer are rendered; every
further block becomes ``<unknown url="https://www.notion.so/<page>#<block>" alt="<type>"/>`` in
its place, its id is listed in ``unknown_block_ids`` and ``truncated`` is true; asking the
endpoint for such a block id answers that block and its subtree. Notion-hosted files carry a
new signed URL on every answer (:func:`standins.notion_content.resign_files`).

``markdown_version`` (https://developers.notion.com/guides/data-apis/migrate-to-notion-flavored-markdown:
a query parameter of this endpoint): absent or ``v1``, the enhanced Markdown above; ``v2``,
Notion-flavored Markdown as that guide describes it — blocks separated by a blank line, a line
break inside a block a single newline, a paragraph, quote or toggle with children in its tag
form (``<p>``, ``<quote>``, ``<toggle>``: the text, a blank line, the children unindented), a
block colour a ``color`` attribute of the tag and never an attribute list; other blocks as in
v1. Anything else: 400 ``validation_error``. Counted in ``markdown_versions`` (``default`` when
absent).

A connection without the read-content capability gets 403 ``restricted_resource``:
:meth:`NotionMarkdown.deny_read_content` switches that on per token or per workspace;
``markdown_endpoint = False`` answers 400 ``invalid_request_url`` as an API without the
endpoint would. Requests are counted as ``calls["pages.markdown"]``.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from standins.notion_content import resign_files
from standins.notion_http import compact

if TYPE_CHECKING:
    from standins.notion_workspaces import Grant

__all__ = ["NotionMarkdown", "render_rich_text_enhanced"]

_ESCAPED = set("\\*~`$[]<>{}|^")
_LIST_PREFIX = {"bulleted_list_item": "- ", "numbered_list_item": "1. ", "quote": "> "}
_FILE_TAGS = {"video": "video", "audio": "audio", "file": "file", "pdf": "pdf"}


def _escape(value: str) -> str:
    return "".join("\\" + c if c in _ESCAPED else c for c in value)


def _attr(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;")


def render_rich_text_enhanced(items: Any) -> str:
    """Rich text items as enhanced Markdown: ``**bold**``, ``*italic*``, ``~~strike~~``,
    `` `code` ``, ``[text](href)`` (``href`` as Notion sends it, relative ones included),
    ``$equation$``, ``<mention-page url="…">Title</mention-page>``, ``<mention-user
    url="user://id">Name</mention-user>``, ``<mention-date start="…"/>``; other mentions are
    their plain text. A line break becomes ``<br>``."""
    out: list[str] = []
    for item in items or []:
        if not isinstance(item, dict):
            continue
        plain = str(item.get("plain_text", ""))
        kind = item.get("type")
        href = item.get("href")
        if kind == "equation":
            out.append(f"${plain}$")
            continue
        if kind == "mention":
            body = item.get("mention") or {}
            mtype = body.get("type")
            value = body.get(mtype) or {}
            if mtype in ("page", "database"):
                url = f"https://www.notion.so/{compact(str(value.get('id', '')))}"
                out.append(f'<mention-{mtype} url="{url}">{_escape(plain)}</mention-{mtype}>')
                continue
            if mtype == "user":
                name = _escape(plain.lstrip("@"))
                out.append(f'<mention-user url="user://{value.get("id", "")}">{name}</mention-user>')
                continue
            if mtype == "date":
                end = value.get("end")
                tail = f' end="{_attr(str(end))}"' if end else ""
                out.append(f'<mention-date start="{_attr(str(value.get("start", "")))}"{tail}/>')
                continue
        notes = item.get("annotations") or {}
        if notes.get("code"):
            piece = f"`{plain}`"
        else:
            core = plain.strip()
            lead = plain[: len(plain) - len(plain.lstrip())]
            trail = plain[len(plain.rstrip()) :] if core else ""
            piece = _escape(core).replace("\n", "<br>")
            if core and notes.get("bold"):
                piece = f"**{piece}**"
            if core and notes.get("italic"):
                piece = f"*{piece}*"
            if core and notes.get("strikethrough"):
                piece = f"~~{piece}~~"
            if notes.get("underline") and core:
                piece = f'<span underline="true">{piece}</span>'
            color = str(notes.get("color") or "default")
            if color != "default" and core:
                piece = f'<span color="{_attr(color.replace("_background", "_bg"))}">{piece}</span>'
            piece = (lead + piece + trail).replace("\n", "<br>")
        out.append(f"[{piece}]({href})" if href else piece)
    return "".join(out)


def _caption(body: dict[str, Any]) -> str:
    return render_rich_text_enhanced(body.get("caption"))


def _file_url(body: dict[str, Any]) -> str:
    source = body.get(str(body.get("type"))) or {}
    return str(source.get("url", "")) if isinstance(source, dict) else ""


class NotionMarkdown:
    """The markdown endpoint as a mixin of :class:`standins.notion_api.FakeNotion` (which
    provides the state, :meth:`_admit` and :meth:`_visible`)."""

    pages: dict[str, dict[str, Any]]
    blocks: dict[str, dict[str, Any]]
    children: dict[str, list[str]]
    workspace_id: str
    #: Blocks rendered per answer before the rest become ``<unknown …/>`` (Notion's limit is
    #: large; tests lower it).
    markdown_block_limit: int = 10_000
    #: ``False``: the endpoint does not exist (400 ``invalid_request_url``).
    markdown_endpoint: bool = True
    #: Answers by the ``markdown_version`` asked (``default`` when none): made on first use.
    markdown_versions: Counter[str]

    if TYPE_CHECKING:

        def _admit(
            self, request: Request, endpoint: str, raw_id: str | None
        ) -> Response | tuple[Grant, str]: ...
        def _visible(self, grant: Grant, object_id: str) -> bool: ...
        def _not_found(self, object_id: str) -> Response: ...
        def _error(
            self, status: int, code: str, message: str, headers: dict[str, str] | None = None
        ) -> Response: ...

    def deny_read_content(
        self, *, token: str | None = None, workspace_id: str | None = None, denied: bool = True
    ) -> None:
        """Answer 403 ``restricted_resource`` to the markdown requests of ``token``, or of
        every token of ``workspace_id`` (neither: the default workspace), as Notion does for a
        connection without the read-content capability; ``denied=False`` gives it back."""
        key = f"token:{token}" if token else f"ws:{workspace_id or self.workspace_id}"
        denials = self.__dict__.setdefault("_markdown_denied", set())
        if denied:
            denials.add(key)
        else:
            denials.discard(key)

    def _denied(self, grant: Grant) -> bool:
        denials: set[str] = self.__dict__.get("_markdown_denied", set())
        return f"token:{grant.token}" in denials or f"ws:{grant.workspace_id}" in denials

    async def _pages_markdown(self, request: Request) -> Response:
        got = self._admit(request, "pages.markdown", request.path_params["page_id"])
        if isinstance(got, Response):
            return got
        grant, object_id = got
        if not self.markdown_endpoint:
            return self._error(400, "invalid_request_url", "Invalid request URL.")
        if self._denied(grant):
            return self._error(
                403, "restricted_resource", "Integration does not have read content capability."
            )
        if not self._visible(grant, object_id):
            return self._not_found(object_id)
        if object_id in self.pages:
            page_id, roots = object_id, self.children.get(object_id, [])
        elif object_id in self.blocks:
            page_id, roots = self._page_of(object_id), [object_id]
        else:
            return self._not_found(object_id)
        version = request.query_params.get("markdown_version")
        if version not in (None, "v1", "v2"):
            return self._error(
                400, "validation_error", f"markdown_version should be `v1` or `v2`, instead was `{version}`."
            )
        if "markdown_versions" not in self.__dict__:
            self.markdown_versions = Counter()
        self.markdown_versions[version or "default"] += 1
        state: dict[str, Any] = {
            "left": self.markdown_block_limit,
            "unknown": [],
            "page": page_id,
            "transcripts": request.query_params.get("include_transcript") in ("true", "True", "1"),
            "v2": version == "v2",
        }
        parts = ["\n".join(self._render(bid, 0, state)) for bid in roots]
        return JSONResponse(
            {
                "object": "page_markdown",
                "id": object_id,
                # v2: "Separate blocks with a blank line" (the migration guide).
                "markdown": ("\n\n" if state["v2"] else "\n").join(parts),
                "truncated": bool(state["unknown"]),
                "unknown_block_ids": state["unknown"],
                "request_id": str(uuid.uuid4()),
            }
        )

    def _page_of(self, block_id: str) -> str:
        current = block_id
        for _ in range(128):
            parent = self.blocks.get(current, {}).get("parent") or {}
            if parent.get("type") == "page_id":
                return str(parent["page_id"])
            current = str(parent.get("block_id", ""))
            if not current:
                break
        return block_id

    def _render(self, block_id: str, depth: int, state: dict[str, Any]) -> list[str]:
        """One block and its subtree as lines, indented ``depth`` tabs."""
        tab = "\t" * depth
        raw = self.blocks.get(block_id)
        if raw is None:
            return []
        data: dict[str, Any] = resign_files(raw)
        btype = str(data["type"])
        if state["left"] <= 0:
            state["unknown"].append(block_id)
            url = f"https://www.notion.so/{compact(state['page'])}#{compact(block_id)}"
            return [f'{tab}<unknown url="{url}" alt="{btype}"/>']
        state["left"] -= 1
        body: dict[str, Any] = data.get(btype) or {}
        text = render_rich_text_enhanced(body.get("rich_text"))
        kids = self.children.get(block_id, [])

        def children(extra: int = 1) -> list[str]:
            out: list[str] = []
            for kid in kids:
                out += self._render(kid, depth + extra, state)
            return out

        color = str(body.get("color") or "default")
        if state.get("v2"):
            shaped = self._render_v2(btype, text, color, kids, depth, state)
            if shaped is not None:
                return shaped
        # Block colours as the format's attribute list (``{color="…"}`` after the text); v2
        # puts them on the block's tag and writes an attribute list as text.
        attrs = (
            f' {{color="{_attr(color.replace("_background", "_bg"))}"}}'
            if color != "default" and not state.get("v2")
            else ""
        )
        if btype == "paragraph":
            return [tab + (text + attrs if text else "<empty-block/>"), *children()]
        if btype.startswith("heading_"):
            level = min(int(btype[-1]), 4)
            toggle = ' {toggle="true"}' if body.get("is_toggleable") else ""
            return [f"{tab}{'#' * level} {text}{toggle}{attrs}", *children()]
        if btype in _LIST_PREFIX:
            return [tab + _LIST_PREFIX[btype] + text + attrs, *children()]
        if btype == "to_do":
            return [f"{tab}- [{'x' if body.get('checked') else ' '}] {text}{attrs}", *children()]
        if btype == "toggle":
            return [f"{tab}<details>", f"{tab}<summary>{text}</summary>", *children(), f"{tab}</details>"]
        if btype == "callout":
            icon = (body.get("icon") or {}).get("emoji", "")
            return [f'{tab}<callout icon="{_attr(icon)}">', f"{tab}\t{text}", *children(), f"{tab}</callout>"]
        if btype == "code":
            source = "".join(str(i.get("plain_text", "")) for i in body.get("rich_text") or [])
            lang = str(body.get("language", ""))
            return [f"{tab}```{lang}", *(tab + line for line in source.split("\n")), f"{tab}```"]
        if btype == "equation":
            return [f"{tab}$$", tab + str(body.get("expression", "")), f"{tab}$$"]
        if btype == "divider":
            return [f"{tab}---"]
        if btype == "table":
            head = "true" if body.get("has_column_header") else "false"
            side = "true" if body.get("has_row_header") else "false"
            rows: list[str] = []
            for rid in kids:
                state["left"] -= 1
                cells = (self.blocks.get(rid, {}).get("table_row") or {}).get("cells") or []
                tds = "".join(f"<td>{render_rich_text_enhanced(c)}</td>" for c in cells)
                rows.append(f"{tab}\t<tr>{tds}</tr>")
            return [f'{tab}<table header-row="{head}" header-column="{side}">', *rows, f"{tab}</table>"]
        if btype == "image":
            return [f"{tab}![{_caption(body)}]({_file_url(body)})"]
        if btype in _FILE_TAGS:
            tag = _FILE_TAGS[btype]
            label = _caption(body) or _escape(str(body.get("name", "")))
            return [f'{tab}<{tag} src="{_attr(_file_url(body))}">{label}</{tag}>']
        if btype in ("bookmark", "embed", "link_preview"):
            url = str(body.get("url", ""))
            return [f"{tab}[{_caption(body) or _escape(url)}]({url})"]
        if btype in ("child_page", "child_database"):
            tag = "page" if btype == "child_page" else "database"
            url = f"https://www.notion.so/{compact(block_id)}"
            return [f'{tab}<{tag} url="{url}">{_escape(str(body.get("title", "")))}</{tag}>']
        if btype == "link_to_page":
            target = str(body.get(str(body.get("type"))) or "")
            tag = "mention-database" if body.get("type") == "database_id" else "mention-page"
            return [f'{tab}<{tag} url="https://www.notion.so/{compact(target)}"/>']
        if btype == "column_list":
            return [f"{tab}<columns>", *children(), f"{tab}</columns>"]
        if btype == "column":
            return [f"{tab}<column>", *children(), f"{tab}</column>"]
        if btype == "synced_block":
            synced = body.get("synced_from") or {}
            original = str(synced.get("block_id") or block_id)
            tag = "synced_block_reference" if synced else "synced_block"
            url = f"https://www.notion.so/{compact(state['page'])}#{compact(original)}"
            return [f'{tab}<{tag} url="{url}">', *children(), f"{tab}</{tag}>"]
        if btype == "tab":
            return [f"{tab}<tabs>", *self._tabs(kids, depth + 1, state), f"{tab}</tabs>"]
        if btype == "meeting_notes":
            # 2026-03-11 (``transcription`` before): its summary, notes and transcript are
            # child blocks named by ``children``; the transcript only with include_transcript
            # (https://developers.notion.com/reference/retrieve-page-markdown), else left out.
            title = render_rich_text_enhanced(body.get("title"))
            refs = body.get("children") or {}
            transcript = refs.get("transcript_block_id") if isinstance(refs, dict) else None
            if transcript and not state.get("transcripts"):
                kids = [k for k in kids if k != transcript]
            return [
                f"{tab}<meeting-notes>",
                *([f"{tab}\t{title}"] if title else []),
                *children(),
                f"{tab}</meeting-notes>",
            ]
        if btype == "template":
            return [*([tab + text] if text else []), *children(0)]
        if btype in ("table_of_contents", "breadcrumb"):
            return [f"{tab}<{btype}/>"]
        # anything else: its text (Notion renders the blocks it knows; keep the words)
        words = text or render_rich_text_enhanced(body.get("title") or body.get("caption"))
        if not words and isinstance(body.get("title"), str):
            words = _escape(body["title"])
        kind = str(body.get("block_type") or btype)
        url = f"https://www.notion.so/{compact(state['page'])}#{compact(block_id)}"
        return [tab + (words or f'<unknown url="{url}" alt="{_attr(kind)}"/>'), *children()]

    def _render_v2(
        self, btype: str, text: str, color: str, kids: list[str], depth: int, state: dict[str, Any]
    ) -> list[str] | None:
        """Notion-flavored Markdown (v2) of a paragraph, toggle or quote; ``None``: another
        type, rendered as in v1. From the migration guide: one newline is a line break
        inside a block, and "a block that has children uses its tag form, such as <p>,
        <quote>, or <toggle>, with the children after a blank line", unindented; a block
        colour is a ``color`` attribute of its tag."""
        if btype not in ("paragraph", "toggle", "quote"):
            return None
        tab = "\t" * depth
        shown = f' color="{_attr(color.replace("_background", "_bg"))}"' if color != "default" else ""
        words = text.replace("<br>", "\n" + tab)
        tag = {"paragraph": "p", "toggle": "toggle", "quote": "quote"}[btype]
        if not kids and btype != "toggle":
            if btype == "paragraph" and not words:
                return [tab + "<empty-block/>"]
            if not shown:
                return [tab + ("> " if btype == "quote" else "") + words]
            if "\n" not in words:
                return [f"{tab}<{tag}{shown}>{words}</{tag}>"]
        inner: list[str] = []
        for kid in kids:
            inner += ["", *self._render(kid, depth, state)]
        return [f"{tab}<{tag}{shown}>", tab + words, *inner, f"{tab}</{tag}>"]

    def _tabs(self, kids: list[str], depth: int, state: dict[str, Any]) -> list[str]:
        """The paragraphs under a ``tab`` block as ``<tab title="…" icon="…">`` elements."""
        tab = "\t" * depth
        out: list[str] = []
        for kid in kids:
            para = (self.blocks.get(kid) or {}).get("paragraph") or {}
            title = "".join(str(i.get("plain_text", "")) for i in para.get("rich_text") or [])
            icon = (para.get("icon") or {}).get("emoji")
            attrs = f' title="{_attr(title)}"' + (f' icon="{_attr(str(icon))}"' if icon else "")
            state["left"] -= 1
            body: list[str] = []
            for grandchild in self.children.get(kid, []):
                body += self._render(grandchild, depth + 1, state)
            out += [f"{tab}<tab{attrs}>", *body, f"{tab}</tab>"]
        return out
