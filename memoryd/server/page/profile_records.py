"""Lists of records in the profile form (people, places, projects, time windows, …):
one fieldset per stored record with an input per field of its model, a "remove" box,
and one blank fieldset to add a record. A record's `meta` is shown read-only and kept
as stored; inside a record, a list of words is a textarea of one item a line and a list
of records (a project's milestones, a routine's time windows) a JSON text.

Names carry the list's path, the record's index and the field:
"r:people[1].name", "x:people[1]" (remove), "n:people" (how many records the form
showed; a list the form did not show is left as stored)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, get_args, get_origin

from pydantic import BaseModel

NEW = "new"  # the index of the blank fieldset


@dataclass(frozen=True)
class RecordField:
    name: str  # as the form sends it
    key: str  # the record's field, as the label shows it
    kind: str  # s (a value), l (a list, one a line), j (a list of records, JSON)
    text: str


@dataclass(frozen=True)
class Record:
    index: str  # "0", "1", … or NEW
    fields: list[RecordField]
    meta: dict[str, Any] | None  # read-only, kept as stored
    removed: bool = False


def field_name(path: str, index: str, key: str) -> str:
    return f"r:{path}[{index}].{key}"


def remove_name(path: str, index: str) -> str:
    return f"x:{path}[{index}]"


def count_name(path: str) -> str:
    return f"n:{path}"


def record_model(model: type[BaseModel] | None, key: str) -> type[BaseModel] | None:
    """The model of the items of `model.key` when it is a list of records."""
    field = model.model_fields.get(key) if model else None
    if field is None or get_origin(field.annotation) is not list:
        return None
    (item,) = get_args(field.annotation)
    return item if isinstance(item, type) and issubclass(item, BaseModel) else None


def sub_model(model: type[BaseModel] | None, key: str) -> type[BaseModel] | None:
    """The model of `model.key` when it is an object (preferences, work_habits, …)."""
    field = model.model_fields.get(key) if model else None
    kind = field.annotation if field else None
    return kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None


def is_list(model: type[BaseModel] | None, key: str) -> bool:
    field = model.model_fields.get(key) if model else None
    return field is not None and get_origin(field.annotation) is list


def _kind(model: type[BaseModel], key: str) -> str:
    if record_model(model, key):
        return "j"
    return "l" if is_list(model, key) else "s"


def _text(kind: str, value: Any) -> str:
    if kind == "j":
        return json.dumps(value, ensure_ascii=False) if value else ""
    if kind == "l":
        return "\n".join(str(v) for v in value or [])
    return "" if value is None else str(value)


def records(path: str, model: type[BaseModel], items: list[Any]) -> list[Record]:
    """A fieldset per stored record, then the blank one."""
    shown = [_record(path, model, str(i), item) for i, item in enumerate(items)]
    return [*shown, _record(path, model, NEW, {})]


def _record(path: str, model: type[BaseModel], index: str, item: Any) -> Record:
    item = item if isinstance(item, dict) else {}
    fields = [
        RecordField(field_name(path, index, key), key, kind, _text(kind, item.get(key)))
        for key in model.model_fields
        if key != "meta"
        for kind in (_kind(model, key),)
    ]
    meta = item.get("meta")
    return Record(index, fields, meta if isinstance(meta, dict) and meta else None)


def typed_records(path: str, shown: list[Record], form: dict[str, str]) -> list[Record]:
    """The records as the form sent them, to show again beside an error."""
    return [
        replace(
            r,
            fields=[replace(f, text=form.get(f.name, f.text)) for f in r.fields],
            removed=remove_name(path, r.index) in form,
        )
        for r in shown
    ]


def records_from_form(
    path: str, model: type[BaseModel], stored: list[Any], form: dict[str, str]
) -> list[Any]:
    """The list as the form edits it: shown records with their typed values and stored
    `meta`, less the removed ones, plus the blank fieldset's record if it was filled.
    Records stored since the form was shown are kept. Raises ValueError naming a field
    whose JSON is not a list."""
    try:
        count = int(form[count_name(path)])
    except ValueError:
        raise ValueError(f"{path}: the form is out of date; reload the page") from None
    kept: list[Any] = []
    for i in range(count):
        if remove_name(path, str(i)) in form:
            continue
        base = stored[i] if i < len(stored) and isinstance(stored[i], dict) else {}
        kept.append(_from_form(f"{path}[{len(kept)}]", model, (path, str(i)), dict(base), form))
    kept.extend(stored[count:])
    new = _from_form(f"{path}[{len(kept)}]", model, (path, NEW), {}, form)
    if any(value not in (None, "", []) for value in new.values()):
        kept.append(new)
    return kept


def _from_form(
    label: str,
    model: type[BaseModel],
    where: tuple[str, str],
    item: dict[str, Any],
    form: dict[str, str],
) -> dict[str, Any]:
    """`item` with the values the form sent for the record at `where` (path, index);
    `label` is where it lands in the saved list, as an error names it."""
    for key, info in model.model_fields.items():
        name = field_name(*where, key)
        if key == "meta" or name not in form:
            continue
        text, kind = form[name], _kind(model, key)
        if kind == "s":
            item[key] = text.strip() or ("" if info.is_required() else None)
        elif kind == "l":
            item[key] = [line.strip() for line in text.splitlines() if line.strip()]
        else:
            item[key] = _json_list(f"{label}.{key}", text)
    return item


def _json_list(label: str, text: str) -> list[Any]:
    try:
        items = json.loads(text or "[]")
    except json.JSONDecodeError as exc:
        raise ValueError(f"{label}: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(items, list):
        raise ValueError(f"{label}: a JSON list is needed")
    return items
