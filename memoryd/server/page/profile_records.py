"""Lists of records in the profile form (people, places, projects, time windows, …):
one fieldset per stored record with an input per field of its model, a "remove" box,
and one blank fieldset to add a record. A record's `meta` is shown read-only and kept
as stored; inside a record, a list of words is a textarea of one item a line (a list of
choices, a window's weekdays, a box per choice, sent a line each), and a list of records
(a project's milestones, a routine's time windows) is fieldsets again, the same way down
to any depth.

Names carry the list's path, the record's index and the field:
"r:people[1].name", "x:people[1]" (remove), "n:people" (how many records the form
showed; a list the form did not show is left as stored); a record's own list adds its
key to the record's place: "r:current_projects[0].key_milestones[new].name",
"n:current_projects[0].key_milestones"."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, get_args, get_origin

from pydantic import BaseModel

from memoryd.errors import RefusedValue
from memoryd.server.page.profile_inputs import TEXT, Input, input_of

NEW = "new"  # the index of the blank fieldset


@dataclass(frozen=True)
class RecordField:
    name: str  # as the form sends it; for r, the name of the list's count
    key: str  # the record's field, as the label shows it
    path: str  # where it is: "people[1].name", "routines[0].time_windows"
    kind: str  # s (a value), l (a list, one a line), r (a list of records)
    text: str  # for r: how many records the form shows
    records: list[Record] = field(default_factory=list)  # for r
    input: Input = TEXT  # for s and l: what the schema's type asks for


@dataclass(frozen=True)
class Record:
    path: str  # the list it is in: "people", "current_projects[0].key_milestones"
    index: str  # "0", "1", … or NEW
    fields: list[RecordField]
    meta: dict[str, Any] | None  # read-only, kept as stored
    removed: bool = False

    @property
    def remove_name(self) -> str:
        return remove_name(self.path, self.index)


def remove_name(path: str, index: str) -> str:
    return f"x:{path}[{index}]"


def count_name(path: str) -> str:
    return f"n:{path}"


def record_model(model: type[BaseModel] | None, key: str) -> type[BaseModel] | None:
    """The model of the items of `model.key` when it is a list of records."""
    info = model.model_fields.get(key) if model else None
    if info is None or get_origin(info.annotation) is not list:
        return None
    (item,) = get_args(info.annotation)
    return item if isinstance(item, type) and issubclass(item, BaseModel) else None


def sub_model(model: type[BaseModel] | None, key: str) -> type[BaseModel] | None:
    """The model of `model.key` when it is an object (preferences, work_habits, …)."""
    info = model.model_fields.get(key) if model else None
    kind = info.annotation if info else None
    return kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None


def is_list(model: type[BaseModel] | None, key: str) -> bool:
    info = model.model_fields.get(key) if model else None
    return info is not None and get_origin(info.annotation) is list


def records(path: str, model: type[BaseModel], items: list[Any]) -> list[Record]:
    """A fieldset per stored record, then the blank one."""
    shown = [_record(path, model, str(i), item) for i, item in enumerate(items)]
    return [*shown, _record(path, model, NEW, {})]


def _record(path: str, model: type[BaseModel], index: str, item: Any) -> Record:
    item = item if isinstance(item, dict) else {}
    at = f"{path}[{index}]"
    fields = [_field(at, model, key, item.get(key)) for key in model.model_fields if key != "meta"]
    meta = item.get("meta")
    return Record(path, index, fields, meta if isinstance(meta, dict) and meta else None)


def _field(at: str, model: type[BaseModel], key: str, value: Any) -> RecordField:
    path = f"{at}.{key}"
    item_model = record_model(model, key)
    if item_model is not None:
        items = value if isinstance(value, list) else []
        shown = records(path, item_model, items)
        return RecordField(count_name(path), key, path, "r", str(len(items)), shown)
    control = input_of(model, key)
    if is_list(model, key):
        text = "\n".join(str(v) for v in value or [])
        return RecordField(f"r:{path}", key, path, "l", text, input=control)
    text = "" if value is None else str(value)
    return RecordField(f"r:{path}", key, path, "s", text, input=control)


def typed_records(shown: list[Record], form: dict[str, str]) -> list[Record]:
    """The records as the form sent them, to show again beside an error."""
    return [
        replace(
            r,
            fields=[_typed(f, form) for f in r.fields],
            removed=r.remove_name in form,
        )
        for r in shown
    ]


def _typed(shown: RecordField, form: dict[str, str]) -> RecordField:
    if shown.kind == "r":
        return replace(shown, records=typed_records(shown.records, form))
    return replace(shown, text=form.get(shown.name, shown.text))


def records_from_form(
    path: str, model: type[BaseModel], stored: list[Any], form: dict[str, str]
) -> list[Any]:
    """The list as the form edits it: shown records with their typed values and stored
    `meta`, less the removed ones, plus the blank fieldset's record if it was filled.
    Records stored since the form was shown are kept. Raises ValueError when the form's
    count of records is not a number."""
    try:
        count = int(form[count_name(path)])
    except ValueError:
        raise RefusedValue.keyed("form.out_of_date", path=path) from None
    kept: list[Any] = []
    for i in range(count):
        if remove_name(path, str(i)) in form:
            continue
        base = stored[i] if i < len(stored) and isinstance(stored[i], dict) else {}
        kept.append(_from_form(f"{path}[{i}]", model, dict(base), form))
    kept.extend(stored[count:])
    new = _from_form(f"{path}[{NEW}]", model, {}, form)
    if any(value not in (None, "", []) for value in new.values()):
        kept.append(new)
    return kept


def _from_form(
    at: str, model: type[BaseModel], item: dict[str, Any], form: dict[str, str]
) -> dict[str, Any]:
    """`item` with the values the form sent for the record at `at` ("people[1]"), its
    own lists of records included."""
    for key, info in model.model_fields.items():
        if key == "meta":
            continue
        path = f"{at}.{key}"
        item_model = record_model(model, key)
        if item_model is not None:
            if count_name(path) in form:
                inner = item.get(key)
                inner = inner if isinstance(inner, list) else []
                item[key] = records_from_form(path, item_model, inner, form)
            continue
        text = form.get(f"r:{path}")
        if text is None:
            continue
        if is_list(model, key):
            item[key] = [line.strip() for line in text.splitlines() if line.strip()]
        else:
            item[key] = text.strip() or ("" if info.is_required() else None)
    return item
