"""Pydantic models for everything that crosses memoryd's edge: turn payloads and LLM output."""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    StringConstraints,
    TypeAdapter,
    field_validator,
    model_validator,
)

from memoryd.models.checks import check_text as check_text  # re-exported
from memoryd.models.profiles import ProfileUpdate
from memoryd.models.tables import Category, Memory

if TYPE_CHECKING:
    from sqlalchemy.sql.elements import ColumnElement

# Identifiers: non-empty, no surrounding whitespace, no control characters.
Ident = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True, min_length=1, max_length=200, pattern=r"^[^\x00-\x1f]+$"
    ),
]
Role = Literal["user", "assistant", "system", "tool"]

# Turn timestamps: an ISO 8601 date and time with a zone, not before this. The upper
# bound is the database clock plus `max_clock_skew_seconds`, checked at ingest.
EARLIEST_TIMESTAMP = datetime(2000, 1, 1, tzinfo=UTC)
TIMESTAMP_EXAMPLE = "2026-11-22T10:00:00Z"
_ISO_START = re.compile(r"\d{4}-\d{2}-\d{2}")

# Hard cap checked before pydantic's own: the configurable limit lives in Settings.
ABSOLUTE_MAX_CONTENT = 1_000_000
MAX_METADATA_DEPTH = 20


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


class TurnIn(BaseModel):
    """One dialogue turn as a chat backend sends it (the `memoryd.ingest_turns` payload item)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)

    agent_id: Ident
    user_id: Ident
    session_id: Ident
    role: Role
    content: str = Field(min_length=1, max_length=ABSOLUTE_MAX_CONTENT)
    turn_key: Ident | None = None
    timestamp: datetime | None = None
    metadata: dict[str, Any] | None = None

    @field_validator("content")
    @classmethod
    def _content_ok(cls, value: str) -> str:
        check_text(value, "content")
        if not value.strip():
            raise ValueError("content is blank")
        return value

    @field_validator("metadata")
    @classmethod
    def _json_metadata(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            check_json(value, "metadata")
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


# --------------------------------------------------------------------------------- LLM output

_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATETIME = TypeAdapter(datetime)
EARLIEST_DAY, LATEST_DAY = date(1900, 1, 1), date(2199, 12, 31)


def parse_day(value: Any) -> tuple[date | None, str | None]:
    """A model's `occurred_at` as a date (the date as written, whatever the time or zone),
    or why it is not one. Null or "" mean "not given", which is not a mistake."""
    if value is None or value == "":
        return None, None
    day: date | None = None
    if isinstance(value, datetime):
        day = value.date()
    elif isinstance(value, date):
        day = value
    elif isinstance(value, str) and _ISO_DAY.match(text := value.strip()):
        try:  # a date, or a datetime whose date part is taken
            day = date.fromisoformat(text) if len(text) == 10 else None
            day = day or _DATETIME.validate_python(text).date()
        except ValueError:  # pydantic's ValidationError is a ValueError too
            day = None
    if day is None:
        return None, f"occurred_at {str(value)[:40]!r} is not a date (YYYY-MM-DD)"
    if not EARLIEST_DAY <= day <= LATEST_DAY:
        return None, f"occurred_at {day} is not between {EARLIEST_DAY} and {LATEST_DAY}"
    return day, None


class Fact(BaseModel):
    """One durable fact the model proposes. `replaces`/`same_as` are the prompt's short ids."""

    model_config = ConfigDict(extra="ignore")

    content: str = Field(min_length=1)
    category: Category = Category.USER
    name: str = Field("", max_length=200)
    tags: list[str] = Field(default_factory=list)
    confidence: float = Field(ge=0, le=1)
    temporary: Literal["no", "short", "followup", "mood"] = "no"
    # The slot `name` names holds one value at a time ("home city"), so a new value
    # retires the old one even when the model was not shown it (memories/reconcile.py).
    single: bool = False
    replaces: int | None = None
    same_as: int | None = None
    # Structured detail kept in the memory's metadata (an experience's pain/solution/…).
    detail: dict[str, Any] | None = None
    # The day an episode happened, as the turns date it ("yesterday" resolved).
    occurred_at: date | None = None
    # Why a proposed occurred_at was dropped; the gate counts it, the fact stays.
    _occurred_at_problem: str | None = PrivateAttr(None)

    @model_validator(mode="wrap")
    @classmethod
    def _drop_a_bad_date(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        """A date the model got wrong costs only the date: never the fact, nor the batch
        (one invalid field would otherwise fail the whole answer)."""
        problem = None
        if isinstance(data, dict) and "occurred_at" in data:
            day, problem = parse_day(data["occurred_at"])
            data = {**data, "occurred_at": day}
        fact = handler(data)
        if problem is not None:
            fact._occurred_at_problem = problem
        return fact

    @property
    def occurred_at_problem(self) -> str | None:
        return self._occurred_at_problem

    @field_validator("category", mode="before")
    @classmethod
    def _known_category(cls, value: Any) -> Any:
        # A model inventing a category ("preference") is common; fall back rather than fail.
        if isinstance(value, str) and value.lower() not in {c.value for c in Category}:
            return Category.USER
        return value.lower() if isinstance(value, str) else value

    @field_validator("tags", mode="before")
    @classmethod
    def _tags_list(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            return [t.strip() for t in value.split(",") if t.strip()]
        return value


class Experience(BaseModel):
    """A problem the conversation solved (seed 002): pain → solution → outcome."""

    model_config = ConfigDict(extra="ignore")

    pain: str = Field(min_length=1, max_length=300)
    solution: str = Field(min_length=1, max_length=300)
    outcome: str | None = Field(None, max_length=300)
    tags: list[str] = Field(default_factory=list)
    confidence: float = Field(ge=0, le=1)

    def as_fact(self) -> Fact:
        """Stored as a memory of category `experience`, deduplicated like any fact."""
        outcome = f" ({self.outcome.rstrip('.')})" if self.outcome else ""
        return Fact(
            content=f"{self.pain.rstrip('.')}: {self.solution.rstrip('.')}{outcome}",
            category=Category.EXPERIENCE,
            name=self.pain[:200],
            tags=self.tags,
            confidence=self.confidence,
            detail={
                "experience": {
                    "pain": self.pain,
                    "solution": self.solution,
                    "outcome": self.outcome,
                }
            },
        )


class ExtractionOutput(BaseModel):
    """The whole answer of one extraction call: facts, experiences and profile updates."""

    model_config = ConfigDict(extra="ignore")

    facts: list[Fact] = Field(default_factory=list)
    experiences: list[Experience] = Field(default_factory=list)
    profile_updates: list[ProfileUpdate] = Field(default_factory=list)


class Decision(BaseModel):
    """How one new fact relates to older memories of its key (the follow-up call)."""

    model_config = ConfigDict(extra="ignore")

    fact: int
    replaces: int | None = None
    same_as: int | None = None


class ResolveOutput(BaseModel):
    """The whole answer of a follow-up call (extraction/resolve.py)."""

    model_config = ConfigDict(extra="ignore")

    decisions: list[Decision] = Field(default_factory=list)


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
