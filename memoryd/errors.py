"""Typed errors whose messages tell the caller what to fix.

An error a person may meet on the page is keyed: `Worded.keyed(code, **params)` makes
its message from ERROR_TEXTS (the API's English, unchanged) and keeps the code and the
params, from which the page words the same sentence in its own language
(server/i18n_errors.py, server/page/wording.py)."""

from __future__ import annotations

import logging
import os
import traceback
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Self

from pydantic import ValidationError
from sqlalchemy.exc import DBAPIError

from memoryd.ids import PATTERN_WORDS

# What each keyed error says; {name}s are its params.
ERROR_TEXTS: dict[str, str] = {
    "memory.missing": "no memory {id}",
    "memory.missing_in_scope": "no memory {id} for {agent!r}/{user!r}",
    "memory.not_active": "memory {id} is {status}; restore it first",
    "memory.superseded": "memory {id} was superseded by {by}; restore or edit that one instead",
    "conflict.missing": "memory {id} is not a superseded memory",
    "conflict.side_not_active": "memory {id} is {status}: restore it before choosing",
    "text.nul": "{field} contains a NUL byte (\\x00); strip it before sending",
    "text.surrogate": "{field} is not valid Unicode (lone surrogate at position {position})",
    "text.blank": "content is blank",
    "zone.unknown": "{value!r} is not a time zone: use an IANA name such as 'Europe/Lisbon'"
    " or an offset such as 'UTC+8' or 'UTC-03:30'",
    "language.unknown": "{value!r} is not a language tag: use a BCP 47 tag such as 'en',"
    " 'pt-BR' or 'zh-CN'",
    "form.out_of_date": "{path}: the form is out of date; reload the page",
    "form.not_object": "{path}: not an object",
}


def error_text(exc: BaseException) -> str:
    """What may be stored or shown of an unexpected error: its type and where it was
    raised, and for a database error the driver's first line. Never the statement, its
    parameters or a message built from data: those hold what users said."""
    try:
        if isinstance(exc, DBAPIError):  # a driver's error, wrapped by SQLAlchemy
            lines = str(exc.orig).strip().splitlines()
            return f"{type(exc.orig).__name__}: {lines[0]}" if lines else type(exc.orig).__name__
        frames = traceback.extract_tb(exc.__traceback__)
        if not frames:
            return type(exc).__name__
        where = frames[-1]
        place = f"{os.path.basename(where.filename)}:{where.lineno}"
        return f"{type(exc).__name__} in {where.name} ({place})"
    except Exception:  # an exception whose text itself fails
        return type(exc).__name__


def log_failure(log: logging.Logger, what: str, exc: BaseException) -> None:
    """Log an unexpected failure as error_text and the frames of its traceback: where to
    look, without the message (which may quote what users said)."""
    frames = "".join(traceback.format_tb(exc.__traceback__))
    log.error("%s: %s\n%s", what, error_text(exc), frames.rstrip())


def field_errors(exc: ValidationError) -> list[tuple[str, str]]:
    """(dotted field, message) per mistake, without pydantic's "Value error, " prefix."""
    errors = exc.errors(include_url=False, include_input=False)
    return [(dotted(e), error_message(e)) for e in errors]


def dotted(error: Any) -> str:
    """Where one of pydantic's errors is, as a dotted field: "extraction.batch_size"."""
    return ".".join(str(part) for part in error["loc"])


def error_message(error: Any) -> str:
    """pydantic's message of one error, without its "Value error, " prefix; an id's
    pattern said in words."""
    if error["type"] == "string_pattern_mismatch":
        words = PATTERN_WORDS.get(error.get("ctx", {}).get("pattern", ""))
        if words is not None:
            return words
    return str(error["msg"]).removeprefix("Value error, ")


class Worded(Exception):
    """An error that may be keyed: its message ERROR_TEXTS[code] filled with `params`."""

    code: str | None = None
    params: Mapping[str, object] = MappingProxyType({})

    @classmethod
    def keyed(cls, code: str, **params: object) -> Self:
        error = cls(ERROR_TEXTS[code].format(**params))
        error.code, error.params = code, params
        return error


class RefusedValue(Worded, ValueError):
    """A value a check refuses (in a pydantic validator: its `value_error`), keyed."""


class MemorydError(Worded):
    """Base of every error memoryd raises on purpose."""


class TurnRejected(MemorydError):
    """A turn payload failed validation; `errors` names each bad field."""

    def __init__(self, message: str, errors: list[dict[str, object]] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or []


class _Rejected(MemorydError):
    """A value failed validation; `errors` names each bad field, and `invalid` is the
    validation's own error, for a reader that words each anew (the page)."""

    def __init__(
        self,
        message: str,
        errors: list[dict[str, str]] | None = None,
        invalid: ValidationError | None = None,
    ) -> None:
        super().__init__(message)
        self.errors = errors or []
        self.invalid = invalid


class ProfileRejected(_Rejected):
    """A profile document or patch failed validation."""


class MemoryRejected(_Rejected):
    """A memory's text failed validation (blank, NUL …)."""


class TaskRejected(MemorydError):
    """A task's arguments no run could use (a foreign client's message): named, not
    retried, and not logged as a bug."""


class TaskFailed(MemorydError):
    """A Celery task failed on a bug; its message is error_text, safe to show anywhere."""


class LLMError(MemorydError):
    """The LLM call failed for good (after retries, or not retryable)."""


class LLMTransientError(LLMError):
    """Rate limit, 5xx, timeout or connection error; retried by the LLM client."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LLMEndpointError(LLMError):
    """The endpoint refuses every request, whatever it holds: a bad key, an unknown
    model or path (401, 403, 404). Not retried within a call; to extraction and
    compression an outage, which no turn is dead-lettered for."""


class LLMOutputError(LLMError):
    """The model's answer was not valid JSON for the schema, even after one repair."""


class LeaseLost(MemorydError):
    """Another worker took over this batch after our lease expired; our result is dropped."""


class BatchFailed(MemorydError):
    """An extraction or compression batch failed; its turns are kept and retried. Raised
    by the Celery task after the bookkeeping, so Flower and task events show FAILURE."""


class DatabaseUnavailable(MemorydError):
    """The database cannot be reached, or is not migrated; the message says which."""


class SharedScopeError(MemorydError):
    """A write to the agent's shared `*` scope that did not say shared=True."""


class NotFound(MemorydError):
    """No such memory in this scope."""


class InvalidState(MemorydError, ValueError):
    """The memory's state does not allow this change (restoring a superseded memory,
    choosing a side of a conflict whose side was deleted): the request was well formed,
    the answer is 409. A ValueError too, for callers that caught one before."""


class ConfigError(MemorydError):
    """A setting that names something unusable (a model that is not installed, say)."""


class InvalidSettings(ConfigError, ValueError):
    """Settings from the environment that do not validate: `lines`, one per mistake, each
    naming its MEMORYD_* variable. A ValueError, as pydantic's error was."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("invalid settings: " + "; ".join(lines))
        self.lines = lines

    def __reduce__(self) -> tuple[type[InvalidSettings], tuple[list[str]]]:
        return (InvalidSettings, (self.lines,))  # pickled (a result backend) as it was made
