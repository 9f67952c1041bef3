"""The page's view of the store: every scope, filtered and searched, for admins only.

Unlike recall, a search here neither ranks nor counts as a use: looking at a memory
must not reinforce it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from memoryd.errors import NotFound
from memoryd.models.db import capped_count
from memoryd.models.schemas import MAX_PAGE, MemoryOut
from memoryd.models.tables import Memory


class BrowseFilter(BaseModel):
    q: str = Field("", max_length=500)
    category: str = Field("", max_length=20)
    tier: str = Field("", max_length=10)
    status: str = Field("active", max_length=12)
    agent: str = Field("", max_length=200)
    user: str = Field("", max_length=200)
    limit: int = Field(50, ge=1, le=MAX_PAGE)
    offset: int = Field(0, ge=0, le=1_000_000)


def browse(session: Session, f: BrowseFilter) -> list[MemoryOut]:
    """Newest first. `q` matches name, content or tags, ignoring case."""
    stmt = _matching(f).order_by(Memory.updated_at.desc(), Memory.id.desc())
    return [MemoryOut.from_memory(m) for m in session.scalars(stmt.limit(f.limit).offset(f.offset))]


def count_browse(session: Session, f: BrowseFilter, cap: int) -> int:
    """How many memories `browse` pages through, at most `cap` (models.db.capped_count)."""
    return capped_count(session, _matching(f).with_only_columns(Memory.id), cap)


def _matching(f: BrowseFilter) -> Any:  # Select of Memory
    stmt = select(Memory)
    for column, value in (
        (Memory.category, f.category),
        (Memory.tier, f.tier),
        (Memory.status, f.status),
        (Memory.agent_id, f.agent),
        (Memory.user_id, f.user),
    ):
        if value:
            stmt = stmt.where(column == value)
    if f.q.strip():
        needle = f.q.strip().lower()
        stmt = stmt.where(
            or_(
                func.lower(Memory.content).contains(needle, autoescape=True),
                func.lower(Memory.name).contains(needle, autoescape=True),
            )
        )
    return stmt


def get_any(session: Session, memory_id: int) -> MemoryOut:
    memory = session.get(Memory, memory_id)
    if memory is None:
        raise NotFound.keyed("memory.missing", id=memory_id)
    return MemoryOut.from_memory(memory)
