"""What a write takes: the facts and experiences proposed for a scope (by an extraction
model, the offline rules, an import or an edit), each validated like any input. The
answer of a model that carries them is checked in extraction/answers.py."""

from __future__ import annotations

import logging
import re
from datetime import date, datetime
from typing import Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    TypeAdapter,
    field_validator,
    model_validator,
)

from memoryd.memories.checks import kept_tags
from memoryd.models.checks import JsonObject
from memoryd.models.tables import Category

log = logging.getLogger(__name__)

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
    detail: JsonObject | None = None
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

    _tags = field_validator("tags", mode="before")(kept_tags)


class Experience(BaseModel):
    """A problem the conversation solved (seed 002): pain → solution → outcome."""

    model_config = ConfigDict(extra="ignore")

    pain: str = Field(min_length=1, max_length=300)
    solution: str = Field(min_length=1, max_length=300)
    outcome: str | None = Field(None, max_length=300)
    tags: list[str] = Field(default_factory=list)
    confidence: float = Field(ge=0, le=1)

    _tags = field_validator("tags", mode="before")(kept_tags)

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
