"""The input a profile field is edited with, read from its type in the schema: a date
picker for dates, a number box (with the schema's lower bound) for whole numbers, a
clock for `Clock` times, a choice for a literal (a box per value for a list of them),
and text for the rest. Each sends text the document's validation reads as the API's
JSON does ("15", "2026-03-01", "06:30", "paused"); an empty one means no value."""

from __future__ import annotations

import types
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal, Union, get_args, get_origin

from annotated_types import Ge
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from memoryd.models.profiles import Clock

_CLOCK = get_args(Clock)[1]  # Clock's constraints: a field annotated Clock carries them


@dataclass(frozen=True)
class Input:
    type: str  # text, number, date, time, select (one literal), checks (a list of them)
    min: int | float | None = None  # for number: the schema's ge
    options: tuple[str, ...] = ()  # for select and checks, in the schema's order


TEXT = Input("text")


def input_of(model: type[BaseModel] | None, key: str) -> Input:
    """The input for `model.key`; text when the type asks for nothing else."""
    info = model.model_fields.get(key) if model else None
    if info is None:
        return TEXT
    kind = _optional(info.annotation)
    if get_origin(kind) is list:
        (item,) = get_args(kind) or (Any,)
        item = _optional(item)
        return Input("checks", options=_values(item)) if get_origin(item) is Literal else TEXT
    if get_origin(kind) is Literal:
        return Input("select", options=_values(kind))
    if kind is date:  # not a datetime (a subclass of date): that stays text
        return Input("date")
    if kind is int:
        return Input("number", min=_lower_bound(info))
    if _CLOCK in info.metadata or kind == Clock:
        return Input("time")
    return TEXT


def _optional(kind: Any) -> Any:
    """`X` of `X | None`; any other type as it is."""
    if get_origin(kind) in (Union, types.UnionType):
        members = [a for a in get_args(kind) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return kind


def _values(literal: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in get_args(literal))


def _lower_bound(info: FieldInfo) -> int | float | None:
    for constraint in info.metadata:
        if isinstance(constraint, Ge) and isinstance(constraint.ge, int | float):
            return constraint.ge
    return None
