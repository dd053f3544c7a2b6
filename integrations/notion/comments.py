"""A page's open discussions, at the end of its document (docs/notion.md, "Comments").

Read with ``comments.list`` (``GET /v1/comments?block_id=<page>``,
https://developers.notion.com/reference/list-comments: "a list of un-resolved Comment objects
from the specified block", 100 a request, ``start_cursor`` / ``next_cursor``), only when the
job's events said a comment changed (kind ``comments``, from ``comment.*``) or by a backfill, a
reconciliation or a re-sync; a body or property edit asks for none. **Resolved discussions are
not returned by the API**, so they are not stored (a discussion resolved since the last sync
disappears from the document with its next comments read).

Each comment object (https://developers.notion.com/reference/comment-object) carries its
``discussion_id``, ``created_time``, ``created_by`` (a partial user), ``display_name`` (when
Notion sends it: ``resolved_name``) and ``rich_text``; comments of one discussion are one
thread, in the order of their ``created_time``; threads in the order of their first comment.

Rendered after the body as::

    ## Comments

    ### Discussion 1

    - **Ada Lovelace**, 2026-11-20 23:55 UTC: First point
    - **user 6794760a…**, 2026-11-21 08:00 UTC: a reply

Text is rich text in the house Markdown (:func:`~integrations.notion.richtext.render_rich_text`,
a line break as a space). The document's ``metadata.comments`` says how many discussions and
comments, and how many characters of the content's end are the section, so a sync that reads the
body alone keeps the section and one that reads the comments alone keeps the body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from integrations.notion.client import NotionCall
from integrations.notion.richtext import render_rich_text

__all__ = ["comments_markdown", "list_comments", "split_comments", "with_comments"]

_PAGE_SIZE = 100


async def list_comments(call: NotionCall, page_id: str) -> list[dict[str, Any]]:
    """Every open comment of page ``page_id`` (all pages of ``comments.list``).

    Raises what :meth:`NotionCall.call` raises (a 403 when the connection lacks the
    read-comments capability is the caller's)."""
    out: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"block_id": page_id, "page_size": _PAGE_SIZE}
        if cursor:
            params["start_cursor"] = cursor
        answer = await call.call(call.api.comments.list, **params)
        if not isinstance(answer, dict):
            break
        out += [c for c in answer.get("results") or [] if isinstance(c, dict)]
        cursor = answer.get("next_cursor") if answer.get("has_more") else None
        if not cursor:
            break
    return out


def _author(comment: Mapping[str, Any]) -> str:
    shown = comment.get("display_name")
    if (
        isinstance(shown, dict)
        and isinstance(shown.get("resolved_name"), str)
        and shown["resolved_name"].strip()
    ):
        return str(shown["resolved_name"]).strip()
    user = comment.get("created_by")
    name = user.get("name") if isinstance(user, dict) else None
    if isinstance(name, str) and name.strip():
        return name.strip()
    uid = user.get("id") if isinstance(user, dict) else None
    return f"user {uid}" if uid else "someone"


def _time(value: Any) -> str:
    """``2026-11-20T23:55:00.000Z`` → ``2026-11-20 23:55 UTC`` (Notion's times are UTC)."""
    if not isinstance(value, str) or len(value) < 16:
        return ""
    return f"{value[:10]} {value[11:16]} UTC"


def comments_markdown(comments: list[dict[str, Any]]) -> str:
    """The ``## Comments`` section of ``comments`` threaded by discussion (module doc); ``""``
    when there are none."""
    threads: dict[str, list[dict[str, Any]]] = {}
    for comment in sorted(comments, key=lambda c: (str(c.get("created_time") or ""), str(c.get("id") or ""))):
        key = str(comment.get("discussion_id") or comment.get("id") or "")
        threads.setdefault(key, []).append(comment)
    if not threads:
        return ""
    lines = ["## Comments"]
    for n, thread in enumerate(threads.values(), 1):
        lines += ["", f"### Discussion {n}", ""]
        for comment in thread:
            text = " ".join(
                render_rich_text(comment.get("rich_text"), line_starts=False).replace("\\\n", " ").split()
            )
            when = _time(comment.get("created_time"))
            lines.append(f"- **{_author(comment)}**{', ' + when if when else ''}: {text}")
    return "\n".join(lines) + "\n"


def with_comments(body: str, section: str) -> tuple[str, int]:
    """The document's content: ``body`` then ``section`` after a blank line; and the length of
    the end that is the section (0 without one)."""
    if not section:
        return body, 0
    tail = ("\n" if body else "") + section
    if body and not body.endswith("\n"):
        tail = "\n" + tail
    return body + tail, len(tail)


def split_comments(content: str, metadata: Mapping[str, Any]) -> tuple[str, str]:
    """A stored document's content as ``(body, comments section)`` (the section as
    :func:`comments_markdown` wrote it, for :func:`with_comments`), from
    ``metadata.comments``'s ``chars`` (no such metadata: all body)."""
    info = metadata.get("comments")
    chars = info.get("chars") if isinstance(info, dict) else None
    if not isinstance(chars, int) or chars <= 0 or chars > len(content):
        return content, ""
    return content[: len(content) - chars], content[len(content) - chars :].lstrip("\n")
