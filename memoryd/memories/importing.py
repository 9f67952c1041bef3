"""Importing one exported memory: idempotent, with its history.

An export line names the memory it came from (`id` and `created_at` in its scope); the
copy an import writes carries that origin in its metadata (`imported_from`), and so does
any export of the copy. A line whose origin the scope already holds (the memory itself,
or a copy of it) adds nothing, so importing a file twice, or into the store it came
from, changes nothing. Lines without an origin (written by hand, or older tools) are
skipped when the scope holds an active memory with the same content, as before.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from memoryd.memories.checks import MemoryContent, kept_tags
from memoryd.memories.proposals import Fact
from memoryd.memories.store import create_memory, find_by_hash
from memoryd.models.checks import JsonObject, check_text
from memoryd.models.coordination import lock_scope
from memoryd.models.keys import Scope
from memoryd.models.schemas import Ident
from memoryd.models.tables import (
    Actor,
    Category,
    EventKind,
    Memory,
    MemoryEvent,
    MemoryStatus,
    Tier,
)
from memoryd.settings import Settings

# Events per exported memory an import takes: a fact confirmed each time it is said
# again passes 10,000 in a few years of a busy user's sessions, and an export that its
# own import refused would lose that memory on a restore. 100,000 is about 20 MB a line.
MAX_HISTORY = 100_000


class EventRecord(BaseModel):
    """One entry of an exported memory's history."""

    model_config = ConfigDict(extra="ignore")

    kind: EventKind
    actor: Actor
    before_content: str | None = Field(None, max_length=10_000)
    after_content: str | None = Field(None, max_length=10_000)
    detail: JsonObject | None = None
    created_at: datetime

    @field_validator("before_content", "after_content")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        return value if value is None else check_text(value, "content")

    @field_validator("created_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return value if value.tzinfo else value.replace(tzinfo=UTC)


class ImportRecord(BaseModel):
    """What `memoryd import` accepts per line (an export line is one). `id`, `created_at`,
    `metadata` and `history` are optional: export files from before they were written
    still import."""

    model_config = ConfigDict(extra="ignore")

    agent_id: Ident
    user_id: Ident
    content: MemoryContent = Field(min_length=1, max_length=10_000)
    category: Category = Category.USER
    name: str = Field("", max_length=200)
    # Within the limits, as a model's: an export of a store that kept longer ones (before
    # the limits) still imports, without those.
    tags: list[str] = Field(default_factory=list)
    confidence: float = Field(0.9, ge=0, le=1)
    tier: Tier = Tier.LONG
    status: MemoryStatus = MemoryStatus.ACTIVE
    expires_at: datetime | None = None
    said_at: datetime | None = None
    occurred_at: datetime | None = None
    id: int | None = Field(None, ge=1)
    created_at: datetime | None = None
    metadata: JsonObject | None = None
    history: list[EventRecord] = Field(default_factory=list, max_length=MAX_HISTORY)

    _tags = field_validator("tags", mode="before")(kept_tags)

    def origin(self) -> str | None:
        """The identity of the memory this line was exported from, or None."""
        first = (self.metadata or {}).get("imported_from")
        if isinstance(first, str) and first:
            return first  # a copy exported again still names the first original
        if self.id is None or self.created_at is None:
            return None
        return origin_key(self.id, self.created_at)


def origin_key(memory_id: int, created_at: datetime) -> str:
    """`id@created_at` (UTC, microseconds): ids alone repeat across stores."""
    aware = created_at if created_at.tzinfo else created_at.replace(tzinfo=UTC)
    return f"{memory_id}@{aware.astimezone(UTC).isoformat(timespec='microseconds')}"


class KnownMemories:
    """The origins each scope already holds, read once per scope per import."""

    def __init__(self) -> None:
        self._by_scope: dict[Scope, set[str]] = {}

    def of(self, session: Session, scope: Scope) -> set[str]:
        if scope not in self._by_scope:
            rows = session.execute(
                select(Memory.id, Memory.created_at, Memory.metadata_).where(Memory.of(scope))
            )
            known: set[str] = set()
            for memory_id, created_at, metadata in rows:
                known.add(origin_key(memory_id, created_at))
                first = (metadata or {}).get("imported_from")
                if isinstance(first, str):
                    known.add(first)
            self._by_scope[scope] = known
        return self._by_scope[scope]


def import_memory(
    session: Session,
    settings: Settings,
    record: ImportRecord,
    known: KnownMemories,
    now: datetime,
) -> bool:
    """Write the line's memory unless the scope already holds it; True if written."""
    scope = Scope(record.agent_id, record.user_id)
    lock_scope(session, scope)
    origin = record.origin()
    if origin is not None and origin in known.of(session, scope):
        return False
    if record.status == MemoryStatus.ACTIVE and find_by_hash(session, scope, record.content):
        return False
    fact = Fact(
        content=record.content,
        category=record.category,
        name=record.name,
        tags=record.tags,
        confidence=record.confidence,
        occurred_at=record.occurred_at.date() if record.occurred_at else None,
    )
    metadata = {"source": "import", **(record.metadata or {})}
    if origin is not None:
        metadata["imported_from"] = origin
        known.of(session, scope).add(origin)
    memory = create_memory(
        session,
        settings,
        scope,
        fact,
        now,
        actor=Actor.API,
        metadata=metadata,
        force_tier=record.tier,
        said_at=record.said_at,
    )
    memory.status = record.status
    if record.status == MemoryStatus.ARCHIVED:
        # When the original was archived is not exported: its retention
        # (archived_retention_days) counts from the import, never from nothing.
        memory.archived_at = now
    if record.tier == Tier.SHORT:
        memory.expires_at = record.expires_at or memory.expires_at
    if record.history:
        _replace_history(session, memory, record.history)
    return True


def _replace_history(session: Session, memory: Memory, history: list[EventRecord]) -> None:
    """The exported events instead of the "created" one the import just wrote, so the
    copy's history reads as the original's. Batch ids belong to the other store: dropped."""
    session.flush()  # the "created" event is written before it is removed
    session.execute(delete(MemoryEvent).where(MemoryEvent.memory_id == memory.id))
    for event in history:
        session.add(
            MemoryEvent(
                memory_id=memory.id,
                agent_id=memory.agent_id,
                user_id=memory.user_id,
                kind=event.kind,
                actor=event.actor,
                before_content=event.before_content,
                after_content=event.after_content,
                detail=event.detail,
                created_at=event.created_at,
            )
        )
