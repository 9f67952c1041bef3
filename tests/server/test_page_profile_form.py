"""The profile form's words and inputs, from the schema: every field of every profile
document, nested records included, has a label in both languages, every literal value a
word in both, and each field the input its type asks for."""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import Any, Literal, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

from memoryd.models.profiles import (
    CONTENT_MODELS,
    Milestone,
    Person,
    Place,
    Project,
    SchedulingPreferences,
    TimeWindow,
)
from memoryd.server.i18n import LANGUAGES, MESSAGES
from memoryd.server.page.profile_inputs import Input, input_of


def _inner(annotation: Any) -> Iterator[Any]:
    """The types inside `annotation`: list items and the members of an optional."""
    origin = get_origin(annotation)
    if origin is list or origin in (Union, types.UnionType):
        for arg in get_args(annotation):
            yield from _inner(arg)
    else:
        yield annotation


def schema_fields(model: type[BaseModel]) -> Iterator[tuple[str, list[str]]]:
    """(key, its literal values) of every field of `model` and of its records, down."""
    for key, info in model.model_fields.items():
        values: list[str] = []
        for kind in _inner(info.annotation):
            if get_origin(kind) is Literal:
                values += [str(v) for v in get_args(kind)]
            elif isinstance(kind, type) and issubclass(kind, BaseModel):
                yield from schema_fields(kind)
        yield key, values


FIELDS = sorted(
    {(key, tuple(values)) for m in CONTENT_MODELS.values() for key, values in schema_fields(m)}
)


def test_the_walk_reaches_nested_records() -> None:
    keys = {key for key, _ in FIELDS}
    assert {"due_date", "weekdays", "last_updated_at", "commute_minutes"} <= keys
    assert ("preference", ("like", "neutral", "avoid")) in FIELDS


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_profile_field_and_choice_has_a_label(lang: str) -> None:
    words = MESSAGES[lang]
    missing = [key for key, _ in FIELDS if f"profile_field.{key}" not in words]
    missing += [
        f"{key}={value}"
        for key, values in FIELDS
        for value in values
        if f"profile_option.{key}.{value}" not in words
    ]
    assert missing == []
    for key, values in FIELDS:
        label = words[f"profile_field.{key}"]
        assert "_" not in label and label != key, (lang, key, label)
        if lang == "zh":  # a Chinese word, not the English one again
            assert label != MESSAGES["en"][f"profile_field.{key}"], key
            for value in values:
                option = words[f"profile_option.{key}.{value}"]
                assert option != value, (key, value)


@pytest.mark.parametrize(
    ("model", "key", "expected"),
    [
        (Person, "name", Input("text")),
        (Place, "commute_minutes", Input("number", min=0)),
        (SchedulingPreferences, "max_meetings_per_day", Input("number", min=0)),
        (Milestone, "due_date", Input("date")),
        (Project, "deadline", Input("date")),
        (TimeWindow, "start", Input("time")),
        (Place, "preference", Input("select", options=("like", "neutral", "avoid"))),
        (Project, "status", Input("select", options=("planned", "active", "paused", "completed"))),
        (Milestone, "status", Input("text")),
        (
            TimeWindow,
            "weekdays",
            Input("checks", options=("mon", "tue", "wed", "thu", "fri", "sat", "sun")),
        ),
        (Project, "collaborators", Input("text")),
    ],
)
def test_each_field_gets_the_input_its_type_asks_for(
    model: type[BaseModel], key: str, expected: Input
) -> None:
    assert input_of(model, key) == expected
