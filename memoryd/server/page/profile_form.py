"""A profile document as a form and back: plain fields as inputs, lists of words as
textareas of one item a line, lists of records (people, projects, time windows) as JSON
without their `meta`, which the page shows read-only and keeps as stored.

Field names carry their kind and path: "s:timezone", "l:interests",
"s:preferences.communication_style", "j:people". The document the form makes is
checked by the same validation as the API's PUT (MemoryClient.put_profile)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, replace
from typing import Any

from memoryd.models.profiles import ItemMeta


@dataclass(frozen=True)
class FormField:
    name: str  # kind:path, as the form sends it
    path: str  # dotted, as the label shows it
    kind: str  # s (a value), l (a list, one a line), j (a list of records, JSON)
    text: str
    meta: list[dict[str, Any]]  # read-only: the field's or each item's meta


def form_fields(content: dict[str, Any], field_meta: dict[str, ItemMeta]) -> list[FormField]:
    fields: list[FormField] = []
    for key, value in content.items():
        if isinstance(value, dict):
            for sub, inner in value.items():
                fields.append(_field(f"{key}.{sub}", inner, {}))
        else:
            fields.append(_field(key, value, field_meta))
    return fields


def _field(path: str, value: Any, field_meta: dict[str, ItemMeta]) -> FormField:
    if isinstance(value, list) and any(isinstance(v, dict) for v in value):
        items = [{k: v for k, v in item.items() if k != "meta"} for item in value]
        metas = [{"name": i.get("name", ""), **i["meta"]} for i in value if i.get("meta")]
        text = json.dumps(items, ensure_ascii=False, indent=2)
        return FormField(f"j:{path}", path, "j", text, metas)
    if isinstance(value, list):
        return FormField(f"l:{path}", path, "l", "\n".join(str(v) for v in value), [])
    meta = [field_meta[path].model_dump(mode="json")] if path in field_meta else []
    return FormField(f"s:{path}", path, "s", "" if value is None else str(value), meta)


def with_typed(fields: list[FormField], form: dict[str, str]) -> list[FormField]:
    """The fields as the form sent them, to show again beside an error."""
    return [replace(f, text=form.get(f.name, f.text)) for f in fields]


def document_from_form(stored: dict[str, Any], form: dict[str, str]) -> dict[str, Any]:
    """The stored document with the form's values in place; items of record lists keep
    their stored `meta` (matched by name). Raises ValueError naming a field whose JSON
    is not a list."""
    document = copy.deepcopy(stored)
    for name, text in form.items():
        kind, _, path = name.partition(":")
        if kind not in ("s", "l", "j") or not path:
            continue
        parent, key = _slot(document, path)
        if kind == "s":
            parent[key] = text.strip() or None
        elif kind == "l":
            parent[key] = [line.strip() for line in text.splitlines() if line.strip()]
        else:
            parent[key] = _records(path, text, parent.get(key) or [])
    return document


def _slot(document: dict[str, Any], path: str) -> tuple[dict[str, Any], str]:
    head, _, tail = path.partition(".")
    if not tail:
        return document, head
    inner = document.setdefault(head, {})
    if not isinstance(inner, dict):
        raise ValueError(f"{head}: not an object")
    return inner, tail


def _records(path: str, text: str, stored: list[Any]) -> list[Any]:
    try:
        items = json.loads(text or "[]")
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(items, list):
        raise ValueError(f"{path}: a JSON list is needed")
    meta = {i.get("name"): i["meta"] for i in stored if isinstance(i, dict) and "meta" in i}
    for item in items:
        if not isinstance(item, dict):
            continue
        item.pop("meta", None)
        if item.get("name") in meta:
            item["meta"] = meta[item["name"]]  # read-only on the page: kept as stored
    return items
