"""Checks every string from outside passes, whatever model it arrives in (turns, profile
values, agent settings): kept apart so any model module can use them without a cycle."""

from __future__ import annotations

import re

from memoryd.zones import parse_zone

# BCP 47's shape, loosely: a 2–3 letter language, then subtags ("zh-Hans-CN", "pt-BR").
_LANGUAGE_TAG = re.compile(r"[A-Za-z]{2,3}(?:-[A-Za-z0-9]{2,8})*")


def check_text(value: str, field: str) -> str:
    """Reject NUL bytes and lone surrogates, which no database stores faithfully."""
    if "\x00" in value:
        raise ValueError(f"{field} contains a NUL byte (\\x00); strip it before sending")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{field} is not valid Unicode (lone surrogate at position {exc.start})"
        ) from None
    return value


def clean_text(value: str) -> str:
    """`check_text` for a model field, whose name pydantic's error already gives."""
    return check_text(value, "the value")


def time_zone_name(value: str) -> str:
    """An IANA zone name or a UTC offset: what extraction and the context block can read."""
    check_text(value, "the time zone")
    if parse_zone(value) is None:
        raise ValueError(
            f"{value[:60]!r} is not a time zone: use an IANA name such as 'Europe/Lisbon' "
            "or an offset such as 'UTC+8' or 'UTC-03:30'"
        )
    return value


def language_tag(value: str) -> str:
    """A BCP 47 language tag such as 'en', 'pt-BR' or 'zh-CN'."""
    check_text(value, "the language")
    if not _LANGUAGE_TAG.fullmatch(value):
        raise ValueError(
            f"{value[:60]!r} is not a language tag: use a BCP 47 tag such as 'en', 'pt-BR' "
            "or 'zh-CN'"
        )
    return value
