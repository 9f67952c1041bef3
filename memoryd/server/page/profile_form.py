"""A profile document as a form and back: plain fields as inputs, lists of words as
textareas of one item a line, lists of records (people, projects, time windows) as a
fieldset per record, and a record's own records (a project's milestones) as fieldsets
inside it (profile_records.py). `meta` is shown read-only and kept as stored. Each
value's input follows its type (profile_inputs.py: dates, numbers, clock times, choices),
and each field is labelled in the page's language (i18n_profile.py), its path the label's
tooltip.

Field names carry their kind and path: "s:timezone", "l:interests",
"s:preferences.communication_style", "r:people[0].name",
"r:current_projects[0].key_milestones[1].due_date". The document the form makes
is checked by the same validation as the API's PUT (MemoryClient.put_profile)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel

from memoryd.errors import RefusedValue
from memoryd.models.profiles import CONTENT_MODELS, ItemMeta, ProfileType
from memoryd.server.page.profile_inputs import TEXT, Input, input_of
from memoryd.server.page.profile_records import (
    Record,
    count_name,
    is_list,
    record_model,
    records,
    records_from_form,
    sub_model,
    typed_records,
)


@dataclass(frozen=True)
class FormField:
    name: str  # kind:path, as the form sends it
    path: str  # dotted, as the label shows it
    kind: str  # s (a value), l (a list, one a line), r (a list of records)
    text: str  # for r: how many records the form shows
    meta: list[dict[str, Any]]  # read-only: the field's meta
    records: list[Record] = field(default_factory=list)
    input: Input = TEXT  # for s and l: what the schema's type asks for


def form_fields(
    kind: ProfileType, content: dict[str, Any], field_meta: dict[str, ItemMeta]
) -> list[FormField]:
    model = CONTENT_MODELS[kind]
    fields: list[FormField] = []
    for key, value in content.items():
        if isinstance(value, dict):
            inner = sub_model(model, key)
            fields += [_field(inner, f"{key}.", sub, v, {}) for sub, v in value.items()]
        else:
            fields.append(_field(model, "", key, value, field_meta))
    return fields


def _field(
    model: type[BaseModel] | None,
    prefix: str,
    key: str,
    value: Any,
    field_meta: dict[str, ItemMeta],
) -> FormField:
    path = f"{prefix}{key}"
    item_model = record_model(model, key)
    if item_model is not None:
        items = value if isinstance(value, list) else []
        shown = records(path, item_model, items)
        return FormField(count_name(path), path, "r", str(len(items)), [], shown)
    control = input_of(model, key)
    if isinstance(value, list) or is_list(model, key):
        text = "\n".join(str(v) for v in value or [])
        return FormField(f"l:{path}", path, "l", text, [], input=control)
    meta = [field_meta[path].model_dump(mode="json")] if path in field_meta else []
    text = "" if value is None else str(value)
    return FormField(f"s:{path}", path, "s", text, meta, input=control)


def with_typed(fields: list[FormField], form: dict[str, str]) -> list[FormField]:
    """The fields as the form sent them, to show again beside an error."""
    return [
        replace(
            f,
            text=form.get(f.name, f.text),
            records=typed_records(f.records, form),
        )
        for f in fields
    ]


def document_from_form(
    kind: ProfileType, stored: dict[str, Any], form: dict[str, str]
) -> dict[str, Any]:
    """The stored document with the form's values in place; records keep their stored
    `meta`. Raises ValueError naming a field whose text cannot be read."""
    document = copy.deepcopy(stored)
    for name, text in form.items():
        kind_of, _, path = name.partition(":")
        if kind_of not in ("s", "l") or not path:
            continue
        parent, key = _slot(document, path)
        if kind_of == "s":
            parent[key] = text.strip() or None
        else:
            parent[key] = [line.strip() for line in text.splitlines() if line.strip()]
    for path, item_model in _record_lists(CONTENT_MODELS[kind]):
        if count_name(path) in form:
            parent, key = _slot(document, path)
            parent[key] = records_from_form(path, item_model, parent.get(key) or [], form)
    return document


def _record_lists(model: type[BaseModel]) -> Iterator[tuple[str, type[BaseModel]]]:
    """(path, item model) of every list of records, top level and one object down."""
    for key in model.model_fields:
        item_model = record_model(model, key)
        if item_model is not None:
            yield key, item_model
        inner = sub_model(model, key)
        for sub in inner.model_fields if inner else ():
            sub_items = record_model(inner, sub)
            if sub_items is not None:
                yield f"{key}.{sub}", sub_items


def _slot(document: dict[str, Any], path: str) -> tuple[dict[str, Any], str]:
    head, _, tail = path.partition(".")
    if not tail:
        return document, head
    inner = document.setdefault(head, {})
    if not isinstance(inner, dict):
        raise RefusedValue.keyed("form.not_object", path=head)
    return inner, tail
