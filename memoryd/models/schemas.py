"""Pydantic models for what crosses memoryd's edge: turn payloads and what the API
returns (the LLM's answers: extraction/answers.py)."""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)

from memoryd.ids import IDENT_PATTERN, TURN_KEY_PATTERN
from memoryd.models.checks import JsonObject, check_text
from memoryd.models.tables import Memory

if TYPE_CHECKING:
    from sqlalchemy.sql.elements import ColumnElement

log = logging.getLogger(__name__)

# Identifiers (agent, user, session), one rule at every entrance (Python, Celery, HTTP
# bodies, paths and queries, MCP, CLI, page): 1 to 200 characters once surrounding
# whitespace is stripped, no control character (C0, DEL, C1) and no "/", which would
# make an id no path route can name. Rows stored under the looser rule before can still
# be listed, recalled and erased through the Python client, which takes any string, and
# listed and erased over HTTP (/v1/stored-scopes) and the CLI (--as-stored).
Ident = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=200, pattern=IDENT_PATTERN),
]
# An id exactly as a row holds it, for rows stored under the looser rule of earlier
# versions ("team/ann"): only to list and erase them, by body or flag, never by path.
StoredId = Annotated[
    str,
    StringConstraints(min_length=1, max_length=200),
    AfterValidator(lambda value: check_text(value, "id")),  # no NUL or lone surrogate
]
# A turn's key may hold "/" ("web/42"): the status route takes the rest of its path.
TurnKey = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True, min_length=1, max_length=200, pattern=TURN_KEY_PATTERN
    ),
]
Role = Literal["user", "assistant", "system", "tool"]

# Turn timestamps: an ISO 8601 date and time with a zone, not before this. The upper
# bound is the database clock plus `max_clock_skew_seconds`, checked at ingest.
EARLIEST_TIMESTAMP = datetime(2000, 1, 1, tzinfo=UTC)
TIMESTAMP_EXAMPLE = "2026-11-22T10:00:00Z"
_ISO_START = re.compile(r"\d{4}-\d{2}-\d{2}")

# Hard cap checked before pydantic's own: the configurable limit lives in Settings.
# The most rows one listing returns (memories, batches, dead letters, history): the API,
# the page and the CLI page through more with before_id / offset.
MAX_PAGE = 500


# The largest value of the store's 32-bit and 64-bit integer columns (profile versions,
# row ids): a history read after it has nothing to give, and the database would refuse it.
INTEGER_MAX, BIGINT_MAX = 2**31 - 1, 2**63 - 1


def history_page(limit: int) -> int:
    """A history page's size, 1 to MAX_PAGE: a caller paging on until a short page must
    not get fewer than it asked for without a word."""
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit: a history page holds 1 to {MAX_PAGE} entries, not {limit}")
    return limit


# The largest context block asked for, at any entrance (HTTP, MCP, CLI).
MAX_TOKEN_BUDGET = 100_000
ABSOLUTE_MAX_CONTENT = 1_000_000


class SessionIds(BaseModel):
    """A session a task's message names (memoryd.extract_session's arguments): text
    only (1 is no id)."""

    model_config = ConfigDict(strict=True, frozen=True)

    agent_id: StoredId  # not Ident: a session stored under the looser rule is extracted too
    user_id: StoredId
    session_id: StoredId


class TurnIn(BaseModel):
    """One dialogue turn as a chat backend sends it (the `memoryd.ingest_turns` payload item)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)

    agent_id: Ident
    user_id: Ident
    session_id: Ident
    role: Role
    content: str = Field(min_length=1, max_length=ABSOLUTE_MAX_CONTENT)
    turn_key: TurnKey | None = None
    timestamp: datetime | None = None
    metadata: JsonObject | None = None

    @field_validator("content")
    @classmethod
    def _content_ok(cls, value: str) -> str:
        check_text(value, "content")
        if not value.strip():
            raise ValueError("content is blank")
        return value

    @field_validator("timestamp", mode="before")
    @classmethod
    def _iso_8601(cls, value: Any) -> Any:
        # pydantic would take a number (or a string of digits) as Unix seconds, which
        # README never promised: refuse it rather than guess the unit.
        if isinstance(value, bool | int | float) or (
            isinstance(value, str) and not _ISO_START.match(value.strip())
        ):
            raise ValueError(
                f"timestamp {str(value)[:40]!r} is not an ISO 8601 date and time; "
                f"send e.g. {TIMESTAMP_EXAMPLE!r}"
            )
        return value

    @field_validator("timestamp")
    @classmethod
    def _aware_and_sane(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            # A time without a zone is ambiguous: taken as UTC, a user's "yesterday" in
            # UTC+8 would land on the wrong day.
            raise ValueError(
                f"timestamp {value.isoformat()} has no time zone; add one "
                f"(e.g. {TIMESTAMP_EXAMPLE!r} or +08:00)"
            )
        try:
            value = value.astimezone(UTC)
        except OverflowError:  # e.g. 9999-12-31T23:00-05:00 is past year 9999 in UTC
            raise ValueError(f"timestamp {value.isoformat()} is out of range") from None
        if value < EARLIEST_TIMESTAMP:
            raise ValueError(
                f"timestamp {value.isoformat()} is before {EARLIEST_TIMESTAMP:%Y-%m-%d}; "
                "it cannot be when a turn was said"
            )
        return value

    @field_validator("user_id")
    @classmethod
    def _not_shared(cls, value: str) -> str:
        if value == "*":
            raise ValueError("user_id '*' is the shared workspace scope; turns belong to a user")
        return value


class IngestResult(BaseModel):
    """What an enqueue call did, item by item (bulk ingest is per-item, never all-or-nothing)."""

    accepted: int = 0
    duplicates: int = 0
    rejected: list[dict[str, Any]] = Field(default_factory=list)
    turn_ids: list[int] = Field(default_factory=list)
    dispatched_sessions: int = 0


# ------------------------------------------------------------------------------ read side


class MemoryOut(BaseModel):
    """A memory as the API returns it."""

    id: int
    agent_id: str
    user_id: str
    category: str
    tier: str
    status: str
    name: str
    content: str
    tags: list[str]
    confidence: float
    evidence_count: int
    access_count: int
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    supersedes_id: int | None
    superseded_by_id: int | None
    metadata: dict[str, Any] | None
    said_at: datetime | None = None  # when its newest source turn was said
    occurred_at: datetime | None = None  # the day an episode happened, when known

    @classmethod
    def from_memory(cls, memory: Memory, **extra: Any) -> Self:
        fields = {name: getattr(memory, _attribute(name)) for name in MemoryOut.model_fields}
        return cls(**fields, **extra)

    @staticmethod
    def columns() -> list[ColumnElement[Any]]:
        """The columns of `memories` it is read from, named as its fields, for a read
        of plain rows (`cls(**row._mapping)`)."""
        return [getattr(Memory, _attribute(name)).label(name) for name in MemoryOut.model_fields]


def _attribute(field: str) -> str:
    """Memory's attribute for a MemoryOut field ("metadata" is reserved on the model)."""
    return "metadata_" if field == "metadata" else field


class EventOut(BaseModel):
    """One entry of a memory's history."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    memory_id: int
    kind: str
    actor: str
    before_content: str | None
    after_content: str | None
    batch_id: int | None
    detail: dict[str, Any] | None
    created_at: datetime
