"""The direct memory API: explicit saves, edits, soft deletes, reads and history.

Every function takes the scope; a memory of another scope is "not found", never
returned or changed. Writes go through the same store/reconcile code as extraction and
take the same scope lock first, so a save racing an extraction of the same fact (or
twenty saves of it) leaves one memory, seen that many times.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.errors import NotFound
from memoryd.memories.checks import checked_content
from memoryd.memories.proposals import Fact
from memoryd.memories.reconcile import reconcile_facts
from memoryd.memories.store import (
    check_writable,
    record_event,
    restore_memory,
    set_content,
)
from memoryd.models.coordination import lock_scope
from memoryd.models.dialect import for_update
from memoryd.models.keys import Scope
from memoryd.models.schemas import BIGINT_MAX, MAX_PAGE, EventOut, MemoryOut, history_page
from memoryd.models.tables import (
    Actor,
    Category,
    EventKind,
    Memory,
    MemoryEvent,
    MemoryStatus,
)
from memoryd.settings import MemorySettings, Settings
from memoryd.text import content_hash


def _owned(
    session: Session, scope: Scope, memory_id: int, *, writable: bool = False, lock: bool = True
) -> Memory:
    """A memory this scope may read (its own or the agent's shared one) or, with
    `writable`, change (its own only; its row is locked unless the caller locks it with
    others, in id order). Anything else is "not found", never revealed."""
    stmt = select(Memory).where(Memory.id == memory_id, Memory.readable_by(scope))
    if writable and lock:
        stmt = for_update(session, stmt)
    memory = session.scalars(stmt).first()
    if memory is None or (writable and memory.user_id != scope.user_id):
        raise NotFound.keyed(
            "memory.missing_in_scope", id=memory_id, agent=scope.agent_id, user=scope.user_id
        )
    return memory


def remember(
    session: Session,
    settings: Settings,
    scope: Scope,
    content: str,
    now: datetime,
    *,
    category: Category = Category.USER,
    name: str = "",
    tags: Sequence[str] = (),
    replaces: int | None = None,
    shared: bool = False,
    nearby: Sequence[int] = (),
) -> tuple[MemoryOut, bool]:
    """An explicit "remember this": long tier, through the same dedup and replacement.
    `nearby`: the memories a near duplicate may be among (the caller's search,
    recall/candidates.py). Returns the memory and whether it was created (False: one
    the scope already held, now confirmed)."""
    check_writable(scope, shared)
    content = checked_content(content)
    fact = Fact(
        content=content,
        category=category,
        name=name,
        tags=list(tags),
        confidence=1.0,
        replaces=1 if replaces is not None else None,
    )
    aliases = {1: replaces} if replaces is not None else {}
    lock_scope(session, scope)
    if replaces is not None:  # reconcile locks it, with the rest, in id order
        _owned(session, scope, replaces, writable=True, lock=False)
    counts = reconcile_facts(
        session,
        settings,
        scope,
        [fact],
        aliases,
        now,
        actor=Actor.API,
        metadata={"source": "api"},
        nearby={content_hash(fact.content): list(nearby)},
    )
    session.flush()
    return MemoryOut.from_memory(counts.kept[0]), counts.created > 0


def update(
    session: Session,
    settings: MemorySettings,
    scope: Scope,
    memory_id: int,
    now: datetime,
    *,
    content: str | None = None,
    name: str | None = None,
    category: Category | None = None,
    tags: Sequence[str] | None = None,
    shared: bool = False,
) -> MemoryOut:
    """Edit what is given; a change to nothing (no field, or the same values) writes
    nothing and records no event."""
    check_writable(scope, shared)
    if content is not None:
        content = checked_content(content)
    lock_scope(session, scope)
    memory = _owned(session, scope, memory_id, writable=True)
    if memory.status != MemoryStatus.ACTIVE:
        raise NotFound.keyed("memory.not_active", id=memory_id, status=memory.status)
    new_content = content if content is not None else memory.content
    if name is None and new_content != memory.content and is_copied_title(memory):
        name = ""  # the old text as a title would be shown and searched after the edit
    changed = (
        new_content != memory.content
        or (name is not None and name[:200] != memory.name)
        or (category is not None and category != memory.category)
        or (tags is not None and list(tags) != list(memory.tags))
    )
    if not changed:
        return MemoryOut.from_memory(memory)
    before = memory.content
    set_content(memory, new_content, name)
    if category is not None:
        memory.category = category
    if tags is not None:
        memory.tags = list(tags)
    memory.updated_at = now
    record_event(session, memory, EventKind.UPDATED, Actor.API, now, before=before)
    session.flush()
    return MemoryOut.from_memory(memory)


def is_copied_title(memory: Memory) -> bool:
    """Whether the memory's name is its content copied rather than a subject key: the
    whole text, or the cut legacy rows stored (content[:60] by the offline extractor,
    content[:200] on creation). A real key ("diet") is never a cut of the text."""
    name, content = memory.name, memory.content
    return bool(name.strip()) and name in {content, content[:60], content[:200]}


def forget(
    session: Session, scope: Scope, memory_id: int, now: datetime, *, shared: bool = False
) -> MemoryOut:
    """Soft delete: hidden from recall, kept with its history, restorable."""
    check_writable(scope, shared)
    lock_scope(session, scope)
    memory = _owned(session, scope, memory_id, writable=True)
    if memory.status != MemoryStatus.DELETED:
        memory.status = MemoryStatus.DELETED
        memory.updated_at = now
        record_event(session, memory, EventKind.DELETED, Actor.API, now)
    session.flush()
    return MemoryOut.from_memory(memory)


def restore(
    session: Session,
    settings: MemorySettings,
    scope: Scope,
    memory_id: int,
    now: datetime,
    *,
    shared: bool = False,
) -> MemoryOut:
    check_writable(scope, shared)
    lock_scope(session, scope)
    memory = _owned(session, scope, memory_id, writable=True)
    restore_memory(session, settings, memory, now, actor=Actor.API)
    session.flush()
    return MemoryOut.from_memory(memory)


def get(session: Session, scope: Scope, memory_id: int) -> MemoryOut:
    return MemoryOut.from_memory(_owned(session, scope, memory_id))


def list_memories(
    session: Session,
    scope: Scope,
    *,
    statuses: Sequence[str] = ("active",),
    categories: Sequence[str] | None = None,
    tiers: Sequence[str] | None = None,
    limit: int = 50,
    offset: int = 0,
) -> list[MemoryOut]:
    """Newest first; `limit` at most MAX_PAGE."""
    stmt = select(Memory).where(Memory.readable_by(scope), Memory.status.in_(list(statuses)))
    if categories:
        stmt = stmt.where(Memory.category.in_(list(categories)))
    if tiers:
        stmt = stmt.where(Memory.tier.in_(list(tiers)))
    stmt = stmt.order_by(Memory.updated_at.desc(), Memory.id.desc())
    stmt = stmt.limit(max(0, min(limit, MAX_PAGE))).offset(max(0, offset))
    return [MemoryOut.from_memory(m) for m in session.scalars(stmt)]


def history(
    session: Session, scope: Scope, memory_id: int, after: int = 0, limit: int = MAX_PAGE
) -> list[EventOut]:
    """Oldest first, the events after the one numbered `after` (its `id`); `limit` 1
    to MAX_PAGE. A memory confirmed each time it is said again gathers an event each
    time: a history is read page by page, never whole."""
    limit = history_page(limit)
    _owned(session, scope, memory_id)
    if after >= BIGINT_MAX:
        return []
    events = session.scalars(
        select(MemoryEvent)
        .where(MemoryEvent.memory_id == memory_id, MemoryEvent.id > after)
        .order_by(MemoryEvent.id)
        .limit(limit)
    )
    return [EventOut.model_validate(e) for e in events]
