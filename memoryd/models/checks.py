"""Checks every string from outside passes, whatever model it arrives in (turns, profile
values, agent settings): kept apart so any model module can use them without a cycle."""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, ValidationInfo

from memoryd.errors import RefusedValue
from memoryd.zones import parse_zone

MAX_METADATA_DEPTH = 20

# BCP 47's shape, loosely: a 2–3 letter language, then subtags ("zh-Hans-CN", "pt-BR").
_LANGUAGE_TAG = re.compile(r"[A-Za-z]{2,3}(?:-[A-Za-z0-9]{2,8})*")


def check_text(value: str, field: str) -> str:
    """Reject NUL bytes and lone surrogates, which no database stores faithfully."""
    if "\x00" in value:
        raise RefusedValue.keyed("text.nul", field=field)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RefusedValue.keyed("text.surrogate", field=field, position=exc.start) from None
    return value


# C0 controls but tab and line breaks, and DEL: no fact or profile value holds them.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def text_problem(value: object) -> str | None:
    """What is wrong with the first bad string anywhere in `value` (strings, lists and
    dicts, keys included): a NUL, a lone surrogate or another control character. For
    what a model writes, which is stored, shown in prompts and sent to clients."""
    if isinstance(value, str):
        if match := _CONTROL.search(value):
            return f"control character U+{ord(match.group()):04X}"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"lone surrogate at position {exc.start}"
        return None
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, list | tuple):
        return next((p for p in map(text_problem, value) if p), None)
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def scrubbed(value: str) -> str:
    """`value` without what text_problem refuses: control characters but tab and line
    breaks dropped, lone surrogates replaced by U+FFFD. For a model's text that is one
    whole (a summary), where there is no item to leave out instead."""
    return _SURROGATE.sub("\ufffd", _CONTROL.sub("", value))


def clean_text(value: str) -> str:
    """`check_text` for a model field, whose name pydantic's error already gives."""
    return check_text(value, "the value")


def time_zone_name(value: str) -> str:
    """An IANA zone name or a UTC offset: what extraction and the context block can read."""
    check_text(value, "the time zone")
    if parse_zone(value) is None:
        raise RefusedValue.keyed("zone.unknown", value=value[:60])
    return value


def language_tag(value: str) -> str:
    """A BCP 47 language tag such as 'en', 'pt-BR' or 'zh-CN'."""
    check_text(value, "the language")
    if not _LANGUAGE_TAG.fullmatch(value):
        raise RefusedValue.keyed("language.unknown", value=value[:60])
    return value


def check_json(value: Any, path: str, depth: int = 0) -> None:
    """Plain JSON only: what every database stores and every client reads back the same.
    Names the first offending place, e.g. `metadata.scores[2]: NaN is not a JSON number`."""
    if depth > MAX_METADATA_DEPTH:
        raise ValueError(f"{path}: nested deeper than {MAX_METADATA_DEPTH} levels")
    if value is None or isinstance(value, bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{path}: {value} is not a JSON number")
    elif isinstance(value, str):
        check_text(value, path)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{path}: key {key!r} is not a string")
            check_text(key, f"{path} key")
            check_json(item, f"{path}.{key}", depth + 1)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            check_json(item, f"{path}[{i}]", depth + 1)
    else:
        raise ValueError(
            f"{path}: a {type(value).__name__} is not a JSON value"
            + (" (send an ISO 8601 string)" if isinstance(value, datetime) else "")
        )


def _plain_json(value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
    check_json(value, info.field_name or "value")
    return value


# A model's free-form JSON object (a turn's or a memory's metadata, a fact's detail):
# check_json under the field's own name, so an error reads `metadata.scores[2]: …`.
JsonObject = Annotated[dict[str, Any], AfterValidator(_plain_json)]
