"""Page properties and database schemas as JSON-simple summaries and Markdown tables.

Shapes: https://developers.notion.com/reference/page-property-values (values, including
rollups of type ``number``/``date``/``array``/``unsupported``/``incomplete``) and
https://developers.notion.com/reference/data-source (schemas). A property value never
yields a Notion-hosted file URL: those are signed and expire after about an hour, so a
``files`` value (also inside a rollup) is summarised by the file names only.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from integrations.notion.richtext import _code_span, escape_markdown, plain_text

__all__ = [
    "page_properties",
    "parent_summary",
    "parse_time",
    "property_cell",
    "property_value",
    "schema_markdown",
    "title_of",
]


def title_of(page: Mapping[str, Any]) -> str:
    """Plain text of a page's ``title`` property (whatever its name), stripped; ``""``."""
    props = page.get("properties")
    if isinstance(props, dict):
        for value in props.values():
            if isinstance(value, dict) and value.get("type") == "title":
                return plain_text(value.get("title")).strip()
    return ""


def user_id(value: Any) -> str | None:
    """The ``id`` of a (partial) user or group object, else ``None``."""
    if isinstance(value, dict) and isinstance(value.get("id"), str):
        return str(value["id"])
    return None


def _date(value: Any) -> str | None:
    """A date object as ``start`` or ``start/end`` (ISO 8601 interval), else ``None``."""
    if not isinstance(value, dict):
        return None
    start, end = value.get("start"), value.get("end")
    if not isinstance(start, str):
        return None
    return f"{start}/{end}" if end else start


def _place(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    for key in ("name", "address"):
        if isinstance(value.get(key), str) and value[key]:
            return str(value[key])
    lat, lon = value.get("lat"), value.get("lon")
    return f"{lat},{lon}" if lat is not None and lon is not None else None


def _scalar(value: Any) -> str | int | float | bool | None:
    return value if isinstance(value, (str, int, float, bool)) else None


def _rollup(value: Any) -> Any:
    """``number`` → the number; ``date`` → like a date property; ``array`` → the values of
    its items (each a property value without id), lists flattened, empty ones dropped;
    ``unsupported``/``incomplete`` → ``None``."""
    if not isinstance(value, dict):
        return None
    kind = value.get("type")
    inner = value.get(kind) if isinstance(kind, str) else None
    if kind == "date":
        return _date(inner)
    if kind == "array":
        out: list[Any] = []
        for item in inner if isinstance(inner, list) else []:
            if not isinstance(item, dict):
                continue
            got = property_value(item)
            if isinstance(got, list):
                out.extend(got)
            elif got is not None and got != "":
                out.append(got)
        return out
    return _scalar(inner)


def property_value(prop: Mapping[str, Any]) -> Any:
    """A JSON-simple summary of one page property value (or a rollup array item).

    ``title``/``rich_text`` → plain text; ``select``/``status`` → option name;
    ``multi_select`` → names; ``people``/``relation`` → ids; ``created_by``/
    ``last_edited_by`` → user id; ``date`` → ``start`` or ``start/end``; ``formula`` → its
    string/number/boolean/date; ``rollup`` → see :func:`_rollup`; ``unique_id`` →
    ``PREFIX-n`` or n; ``files`` → file names (never the URLs); ``verification`` → its
    ``state``; ``place`` → name, address or ``lat,lon``; ``button`` → ``None``; ``number``,
    ``checkbox``, ``url``, ``email``, ``phone_number``, ``*_time`` → the value. Unknown
    types → the value if it is a scalar, else ``None``.
    """
    kind = prop.get("type")
    value = prop.get(kind) if isinstance(kind, str) else None
    if kind in ("title", "rich_text"):
        return plain_text(value)
    if kind in ("select", "status"):
        return value.get("name") if isinstance(value, dict) else None
    if kind == "multi_select":
        return [o.get("name") for o in value or [] if isinstance(o, dict)]
    if kind in ("people", "relation"):
        return [i for i in (user_id(v) for v in value or []) if i]
    if kind in ("created_by", "last_edited_by"):
        return user_id(value)
    if kind == "date":
        return _date(value)
    if kind == "formula":
        if not isinstance(value, dict):
            return None
        inner = value.get(value.get("type", ""))
        return _date(inner) if value.get("type") == "date" else _scalar(inner)
    if kind == "rollup":
        return _rollup(value)
    if kind == "unique_id":
        if not isinstance(value, dict):
            return None
        prefix, num = value.get("prefix"), value.get("number")
        return f"{prefix}-{num}" if prefix else num
    if kind == "files":
        return [f.get("name") for f in value or [] if isinstance(f, dict)]
    if kind == "verification":
        return value.get("state") if isinstance(value, dict) else None
    if kind == "place":
        return _place(value)
    return _scalar(value)


def page_properties(props: Any) -> dict[str, Any]:
    """``{name: property_value(value)}`` of a page's properties but its title: what a page's
    document keeps in ``metadata.properties`` and what a data source's table shows
    (:func:`property_cell`), whether the row comes from the API or from its stored document."""
    if not isinstance(props, dict):
        return {}
    return {
        str(name): property_value(value)
        for name, value in props.items()
        if isinstance(value, dict) and value.get("type") != "title"
    }


def property_cell(value: Any) -> str:
    """One summarised property value (:func:`property_value`'s output, as a row document's
    ``metadata.properties`` holds it) as the text of a GFM table cell: ``None`` and ``[]`` →
    empty; ``True``/``False`` → ``Yes``/``No``; a list → its items joined by ``, ``; a number
    as JSON writes it; text Markdown-escaped, ``|`` as ``\\|`` and line breaks as spaces (a
    GFM cell is one line). The one rule of a data source's table
    (:mod:`integrations.notion.table`), applied to the API's rows and the stored ones alike."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "Yes" if value else "No"
    if isinstance(value, list):
        return ", ".join(c for c in (property_cell(v) for v in value) if c)
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, dict):
        return ""
    text = " ".join(str(value).split())
    return escape_markdown(text).replace("|", "\\|")


def parent_summary(parent: Any) -> dict[str, Any]:
    """``{"type": "page_id", "id": "…"}`` from a parent object (``workspace`` has no id)."""
    if not isinstance(parent, dict):
        return {}
    kind = parent.get("type")
    out: dict[str, Any] = {"type": kind}
    value = parent.get(kind) if isinstance(kind, str) else None
    if isinstance(value, str):
        out["id"] = value
    if isinstance(parent.get("database_id"), str) and kind != "database_id":
        out["database_id"] = parent["database_id"]
    return out


def parse_time(value: Any) -> datetime | None:
    """An ISO 8601 timestamp (``2026-11-20T23:55:00.000Z``) as aware UTC, else ``None``."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def _schema_details(prop: Mapping[str, Any]) -> str:
    kind = prop.get("type")
    config = prop.get(kind) if isinstance(kind, str) else None
    if not isinstance(config, dict):
        return ""
    options = config.get("options")
    if isinstance(options, list):
        return ", ".join(str(o.get("name")) for o in options if isinstance(o, dict))
    if kind == "number" and config.get("format"):
        return str(config["format"])
    if kind == "formula" and config.get("expression"):
        return _code_span(str(config["expression"]))
    if kind == "relation":
        target = config.get("data_source_id") or config.get("database_id")
        return f"→ {target}" if target else ""
    if kind == "rollup":
        return " ".join(str(config[k]) for k in ("function", "rollup_property_name") if config.get(k))
    return ""


def schema_markdown(data_source: Mapping[str, Any]) -> list[str]:
    """A data source's property schema as a GFM table (Property | Type | Details) of lines;
    ``["(no properties)"]`` when it has none."""
    props = data_source.get("properties")
    if not isinstance(props, dict) or not props:
        return ["(no properties)"]
    lines = ["| Property | Type | Details |", "| --- | --- | --- |"]
    for name, prop in props.items():
        if not isinstance(prop, dict):
            continue
        cells = [str(name), str(prop.get("type") or ""), _schema_details(prop)]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return lines


def schema_summary(data_source: Mapping[str, Any]) -> dict[str, str]:
    """``{property name: type}`` of a data source (or a pre-2025-09-03 database)."""
    props = data_source.get("properties")
    if not isinstance(props, dict):
        return {}
    return {str(k): str(v.get("type")) for k, v in props.items() if isinstance(v, dict)}
