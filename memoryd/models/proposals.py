"""What an extraction model answers, validated like any input: facts, experiences and
profile updates, each item on its own (a bad item costs that item, never the answer)."""

from __future__ import annotations

import logging
import re
from collections import Counter
from datetime import date, datetime
from typing import Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from memoryd.errors import field_errors
from memoryd.models.checks import JsonObject, text_problem
from memoryd.models.profiles import ProfileUpdate
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
    """The whole answer of one extraction call: facts, experiences and profile updates.

    Each item is checked on its own, its strings like input (text_problem): a malformed
    item, or one holding a NUL, a lone surrogate or a control character, costs that item
    and is counted in `dropped` by reason, never the answer. The same answer comes back
    at temperature 0, so refusing it whole would fail its batch until dead-lettered."""

    model_config = ConfigDict(extra="ignore")

    facts: list[Fact] = Field(default_factory=list)
    experiences: list[Experience] = Field(default_factory=list)
    profile_updates: list[ProfileUpdate] = Field(default_factory=list)
    _dropped: Counter[str] = PrivateAttr(default_factory=Counter)

    @model_validator(mode="wrap")
    @classmethod
    def _drop_bad_items(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        dropped: Counter[str] = Counter()
        if isinstance(data, dict):
            data = {
                **data,
                **{
                    field: _valid_items(data[field], model, reason, dropped)
                    for field, (model, reason) in _ITEM_KINDS.items()
                    if isinstance(data.get(field), list)
                },
            }
        output = handler(data)
        output._dropped = dropped
        return output

    @property
    def dropped(self) -> Counter[str]:
        """Items left out, by reason: invalid_fact, invalid_text (facts and experiences),
        profile_invalid_update, profile_invalid_text."""
        return self._dropped

    @classmethod
    def response_json_schema(cls) -> dict[str, Any]:
        """The schema a model answers to: every field the pipeline decides by is required
        (a model bound by a grammar skips what is optional), null where "none" is an answer.
        Validation stays lenient: a field left out keeps its default."""
        schema = cls.model_json_schema()
        schema["required"] = ["facts", "experiences", "profile_updates"]
        schema["$defs"]["Fact"]["required"] = list(ANSWERED_FACT_FIELDS)
        return schema


# What every fact of an answer states: its key and whether the key holds one value are
# what replacement hangs on (memories/reconcile.py).
ANSWERED_FACT_FIELDS = (
    "content", "category", "name", "single", "confidence", "temporary", "replaces", "same_as",
)  # fmt: skip

# Per list of an extraction answer: its item model and the prefix of its drop reasons.
_ITEM_KINDS: dict[str, tuple[type[BaseModel], str]] = {
    "facts": (Fact, "invalid_"),
    "experiences": (Experience, "invalid_"),
    "profile_updates": (ProfileUpdate, "profile_invalid_"),
}


def _valid_items(
    items: list[Any], model: type[BaseModel], reason: str, dropped: Counter[str]
) -> list[Any]:
    kept = []
    for item in items:
        try:
            valid = model.model_validate(item)
        except ValidationError as exc:
            dropped[reason + ("fact" if model is not ProfileUpdate else "update")] += 1
            log.warning("dropped a proposed %s: %s", model.__name__, _first_error(exc))
            continue
        try:
            problem = text_problem(valid.model_dump(mode="python"))
        except (ValueError, RecursionError):  # a value nested past what can be walked
            problem = "nested too deeply"
        if problem:
            dropped[reason + "text"] += 1
            log.warning("dropped a proposed %s: %s", model.__name__, problem)
            continue
        kept.append(valid)
    return kept


def _first_error(exc: ValidationError) -> str:
    """Field and message, never the value: it is the user's text."""
    field, message = field_errors(exc)[0]
    return f"{field}: {message}"


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
