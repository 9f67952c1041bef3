"""Request and response bodies of the HTTP API. Requests forbid unknown fields, so a typo
is a 422 naming it instead of a silently ignored value."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from memoryd.memories.checks import MAX_TAG_CHARS, MAX_TAGS, not_blank
from memoryd.models.checks import check_text
from memoryd.models.schemas import MAX_PAGE, MAX_TOKEN_BUDGET, Ident, MemoryOut, TurnIn
from memoryd.models.tables import Category, Tier
from memoryd.recall.as_of import Moment
from memoryd.recall.hits import Hit
from memoryd.recall.session_context import SessionContext

# The largest integer every JSON reader holds exactly (JavaScript's numbers are doubles).
MAX_ID = 2**53 - 1
# Ids in paths and queries follow the bodies' rule (models/schemas.py: Ident).
AgentPath = Annotated[Ident, Path()]
UserPath = Annotated[Ident, Path()]
SessionPath = Annotated[Ident, Path()]
MemoryIdPath = Annotated[int, Path(ge=1, le=MAX_ID)]
# A history, oldest first, a page at a time: the next page starts after the last entry.
HistoryAfter = Annotated[
    int,
    Query(
        ge=0,
        le=MAX_ID,
        description="Only the entries after this one: a memory event's `id`, a profile's "
        "`version`. The next page starts after the last entry returned.",
    ),
]
HistoryLimit = Annotated[
    int, Query(ge=1, le=MAX_PAGE, description="At most this many entries, oldest first")
]


def _clean(value: str) -> str:
    return check_text(value, "text")


CleanText = Annotated[str, AfterValidator(_clean)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TurnsRequest(Strict):
    """`POST /v1/turns`: many turns (a single turn object is accepted too; an empty list
    stores nothing)."""

    turns: list[TurnIn]


class SessionEnded(BaseModel):
    ended: bool


class SessionContextOut(SessionContext):
    text: str


AS_OF = (
    "with a timezone: the memories that were active at that moment, with the text they "
    "had then, ranked by keywords; such a read is not logged as a use"
)
AsOf = Annotated[Moment | None, Field(description=AS_OF)]


class RecallRequest(Strict):
    agent_id: Ident
    user_id: Ident
    query: CleanText = Field(max_length=10_000)
    k: int | None = Field(None, ge=1, le=500, description="default: the agent's prefetch_limit")
    categories: list[Category] | None = None
    tiers: list[Tier] | None = None
    session_id: Ident | None = None
    as_of: AsOf = None


class RecallOut(BaseModel):
    memories: list[Hit]


class ContextRequest(Strict):
    agent_id: Ident
    user_id: Ident
    query: CleanText = Field(max_length=10_000)
    token_budget: int | None = Field(
        None, ge=1, le=MAX_TOKEN_BUDGET, description="default: the agent's context_token_budget"
    )
    session_id: Ident | None = None
    as_of: AsOf = None


class ContextOut(BaseModel):
    context: str = Field(description='the <memory-context> block, or "" when nothing fits')


Tag = Annotated[CleanText, Field(min_length=1, max_length=MAX_TAG_CHARS)]


# Blank refused with the same words as by the client, the tools and import.
MemoryText = Annotated[CleanText, AfterValidator(not_blank)]


class MemoryCreate(Strict):
    content: MemoryText = Field(min_length=1, max_length=4000)
    category: Category = Category.USER
    name: CleanText = Field("", max_length=200)
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    replaces: int | None = Field(None, ge=1, le=MAX_ID)


class MemoryUpdate(Strict):
    content: MemoryText | None = Field(None, min_length=1, max_length=4000)
    name: CleanText | None = Field(None, max_length=200)
    category: Category | None = None
    tags: list[Tag] | None = Field(None, max_length=MAX_TAGS)


class MemoryList(BaseModel):
    memories: list[MemoryOut]


class RetryRequest(Strict):
    agent_id: Ident | None = None
    user_id: Ident | None = None
    session_id: Ident | None = None


class RetryOut(BaseModel):
    retried: int


class SkipOut(BaseModel):
    skipped: int


class PurgeOut(BaseModel):
    purged: int


class HealthOut(BaseModel):
    status: str
    database: str


class StatsOut(BaseModel):
    pipeline: dict[str, Any]
    health: dict[str, Any]
