"""Export and import of memories as JSON lines (every status, so nothing is lost)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.memories.store import create_memory, find_by_hash
from memoryd.models.db import lock_scope
from memoryd.models.keys import Scope
from memoryd.models.schemas import Fact, Ident, MemoryOut
from memoryd.models.tables import Actor, Category, Memory, MemoryStatus, Tier
from memoryd.settings import Settings

EXPORT_CHUNK = 1000


def export_memories(
    session: Session, agent_id: str | None = None, user_id: str | None = None
) -> Iterator[str]:
    """One JSON object per memory, oldest first, streamed in chunks."""
    last = 0
    while True:
        stmt = select(Memory).where(Memory.id > last)
        if agent_id:
            stmt = stmt.where(Memory.agent_id == agent_id)
        if user_id:
            stmt = stmt.where(Memory.user_id == user_id)
        rows = session.scalars(stmt.order_by(Memory.id).limit(EXPORT_CHUNK)).all()
        if not rows:
            return
        for memory in rows:
            yield MemoryOut.from_memory(memory).model_dump_json()
        last = rows[-1].id


class ImportRecord(BaseModel):
    """What `memoryd import` accepts per line (an export line is one)."""

    model_config = ConfigDict(extra="ignore")

    agent_id: Ident
    user_id: Ident
    content: str = Field(min_length=1, max_length=10_000)
    category: Category = Category.USER
    name: str = Field("", max_length=200)
    tags: list[str] = Field(default_factory=list)
    confidence: float = Field(0.9, ge=0, le=1)
    tier: Tier = Tier.LONG
    status: MemoryStatus = MemoryStatus.ACTIVE
    expires_at: datetime | None = None


def import_memories(
    session: Session, settings: Settings, lines: Iterable[str], now: datetime
) -> dict[str, object]:
    """Add memories; an active one whose content the scope already holds is skipped.
    Bad lines are reported by number and do not stop the others."""
    imported = skipped = 0
    errors: list[str] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = ImportRecord.model_validate(json.loads(line))
        except (json.JSONDecodeError, ValidationError) as exc:
            errors.append(f"line {number}: {str(exc).splitlines()[0]}")
            continue
        scope = Scope(record.agent_id, record.user_id)
        lock_scope(session, scope)
        if record.status == MemoryStatus.ACTIVE and find_by_hash(session, scope, record.content):
            skipped += 1
            continue
        fact = Fact(
            content=record.content,
            category=record.category,
            name=record.name,
            tags=record.tags,
            confidence=record.confidence,
        )
        memory = create_memory(
            session,
            settings,
            scope,
            fact,
            now,
            actor=Actor.API,
            metadata={"source": "import"},
            force_tier=record.tier,
        )
        memory.status = record.status
        if record.tier == Tier.SHORT:
            memory.expires_at = record.expires_at or memory.expires_at
        imported += 1
    session.flush()
    return {"imported": imported, "skipped": skipped, "errors": errors}
