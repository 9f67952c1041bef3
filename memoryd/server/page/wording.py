"""Errors in the page's language. The API words its errors in English; the page words
each again from what the error is, never from its English sentence: a keyed error
(memoryd/errors.py) by its code and params, a validation error by pydantic's type and
context, field by field. An error with neither is shown as its kind's title alone,
except on the English page, which may show the server's English as it is."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from memoryd.errors import MemoryRejected, ProfileRejected, Worded
from memoryd.server.i18n import MESSAGES, translator

SERVER_LANGUAGE = "en"  # the language of the server's own sentences
LOCATIONS = ("body", "query", "path", "header", "cookie")  # a request field's first part

# pydantic's error types, by the kind of mistake the page words (i18n_errors: invalid.*).
MISTAKES: dict[str, str] = {
    "missing": "missing",
    "string_type": "text",
    "string_too_short": "text_too_short",
    "string_too_long": "text_too_long",
    "string_pattern_mismatch": "pattern",
    "int_type": "whole_number",
    "int_parsing": "whole_number",
    "int_parsing_size": "whole_number",
    "int_from_float": "whole_number",
    "float_type": "number",
    "float_parsing": "number",
    "finite_number": "finite",
    "bool_type": "yes_no",
    "bool_parsing": "yes_no",
    "greater_than": "gt",
    "greater_than_equal": "ge",
    "less_than": "lt",
    "less_than_equal": "le",
    "literal_error": "one_of",
    "enum": "one_of",
    "date_type": "date",
    "date_parsing": "date",
    "date_from_datetime_parsing": "date",
    "date_from_datetime_inexact": "date",
    "datetime_type": "datetime",
    "datetime_parsing": "datetime",
    "datetime_from_date_parsing": "datetime",
    "too_short": "too_few",
    "too_long": "too_many",
    "list_type": "list",
    "dict_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
    "extra_forbidden": "unknown_field",
}
TEXT_LENGTHS = {"too_few": "text_too_short", "too_many": "text_too_long"}
_CHOICE = re.compile(r", | or ")  # between pydantic's expected values: 'a', 'b' or 'c'


@dataclass(frozen=True)
class Wording:
    lang: str

    @property
    def t(self) -> Callable[..., str]:
        return translator(self.lang)

    def of(self, exc: BaseException, english: str | None) -> str | None:
        """What `exc` says in the page's language: `english` is the server's sentence for
        it, shown as it is on the English page only; None when there is nothing to add to
        the error's title."""
        if isinstance(exc, RequestValidationError):
            return self.invalid(exc.errors(), request=True)
        if isinstance(exc, ValidationError):
            return self.invalid(exc.errors(include_url=False))
        if isinstance(exc, ProfileRejected | MemoryRejected) and exc.invalid is not None:
            return self.invalid(exc.invalid.errors(include_url=False))
        return self.keyed(exc) or self._own(english)

    def keyed(self, exc: object) -> str | None:
        """A keyed error's sentence; None for any other error."""
        if not isinstance(exc, Worded) or exc.code is None:
            return None
        return self.t(f"problem.{exc.code}", **self._labelled(exc.params))

    def invalid(self, errors: Sequence[Mapping[str, Any]], request: bool = False) -> str:
        """Each mistake as "field: what is wrong", in the order pydantic found them."""
        return self.t("invalid.and").join(
            self.t("invalid.field", field=_field(e["loc"], request), mistake=self._mistake(e))
            for e in errors
        )

    def _mistake(self, error: Mapping[str, Any]) -> str:
        context = dict(error.get("ctx") or {})
        english = str(error.get("msg", "")).removeprefix("Value error, ")
        if error["type"] == "value_error":
            return self.keyed(context.get("error")) or self._own(english) or ""
        kind = MISTAKES.get(error["type"])
        if kind is None:
            return self._own(english) or ""
        if isinstance(error.get("input"), str):  # a length constraint on a str | None
            kind = TEXT_LENGTHS.get(kind, kind)
        if kind in ("text_too_short", "too_few") and context.get("min_length") == 1:
            kind = "empty"
        if "expected" in context:
            context["expected"] = self._choices(str(context["expected"]))
        return self.t(f"invalid.{kind}", **context)

    def _choices(self, expected: str) -> str:
        """pydantic's list of allowed values ("'a', 'b' or 'c'") in the page's words."""
        *most, last = _CHOICE.split(expected)
        if not most:
            return last
        return self.t("invalid.comma").join(most) + self.t("invalid.or") + last

    def _own(self, english: str | None) -> str | None:
        """The server's English where the page has no words of its own for an error."""
        if self.lang == SERVER_LANGUAGE:
            return english or None
        return self.t("invalid.other") if english else None

    def _labelled(self, params: Mapping[str, object]) -> dict[str, object]:
        """Params that name a stored value ("status": "deleted") in the page's words."""
        words = MESSAGES.get(self.lang, {})
        return {name: words.get(f"{name}.{value}", value) for name, value in params.items()}


def _field(loc: Sequence[str | int], request: bool) -> str:
    """A field's place as the page names it: people[1].name."""
    parts = list(loc)
    if request and parts and parts[0] in LOCATIONS:
        parts = parts[1:]
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out or "—"
