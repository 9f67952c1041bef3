"""What an extraction model answers, validated like any input: facts, experiences and
profile updates, each item on its own (a bad item costs that item, never the answer);
and the follow-up call's decisions (resolve.py)."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from memoryd.errors import field_errors
from memoryd.memories.proposals import Experience, Fact
from memoryd.models.checks import text_problem
from memoryd.models.profiles import ProfileUpdate

log = logging.getLogger(__name__)


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
