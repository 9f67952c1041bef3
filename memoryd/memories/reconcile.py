"""Reconcile accepted facts with what the scope already remembers.

Runs inside the batch's write transaction under the per-scope lock, so two workers
proposing the same fact for one user cannot both create it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.memories.store import (
    as_day_start,
    confirm_memory,
    create_memory,
    find_by_hash,
    lock_memory,
    record_event,
    supersede_memory,
)
from memoryd.models.keys import Scope
from memoryd.models.schemas import Fact
from memoryd.models.tables import Actor, EventKind, Memory, MemoryStatus
from memoryd.settings import Settings
from memoryd.text import content_hash, similarity, trigrams

NEAR_DUP_CANDIDATES = 200


@dataclass
class ReconcileCounts:
    created: int = 0
    confirmed: int = 0
    superseded: int = 0
    kept: list[Memory] = field(default_factory=list)  # the memory each fact ended up in


def active_memories(session: Session, scope: Scope, limit: int) -> list[Memory]:
    return list(
        session.scalars(
            select(Memory)
            .where(
                Memory.agent_id == scope.agent_id,
                Memory.user_id == scope.user_id,
                Memory.status == MemoryStatus.ACTIVE,
            )
            .order_by(Memory.updated_at.desc(), Memory.id.desc())
            .limit(limit)
        )
    )


def relevant_memories(session: Session, scope: Scope, text: str, limit: int) -> list[Memory]:
    """Memories to show the extractor: the recent ones that share most trigrams with the
    batch (containment of the memory's trigrams in the batch text)."""
    if limit <= 0:
        return []
    batch_grams = trigrams(text)
    candidates = active_memories(session, scope, NEAR_DUP_CANDIDATES)

    def overlap(m: Memory) -> float:
        grams = trigrams(m.content)
        return len(grams & batch_grams) / len(grams) if grams else 0.0

    return sorted(candidates, key=overlap, reverse=True)[:limit]


def _in_scope(session: Session, scope: Scope, memory_id: int | None) -> Memory | None:
    if memory_id is None:
        return None
    memory = session.get(Memory, memory_id)
    if memory is None or (memory.agent_id, memory.user_id) != (scope.agent_id, scope.user_id):
        return None
    return memory if memory.status == MemoryStatus.ACTIVE else None


def reconcile_facts(
    session: Session,
    settings: Settings,
    scope: Scope,
    facts: Sequence[Fact],
    aliases: Mapping[int, int],
    now: datetime,
    *,
    actor: Actor = Actor.EXTRACTOR,
    batch_id: int | None = None,
    source_turn_ids: list[int] | None = None,
    metadata: dict[str, Any] | None = None,
    said_at: datetime | None = None,
) -> ReconcileCounts:
    """Confirm duplicates, create new memories, retire the ones a new fact replaces.

    `said_at` is when the facts' source turns were said (extraction passes the batch's
    newest turn). A fact then only replaces a memory said no later than it: a re-driven
    old turn never retires a newer fact (see `_keep_as_history`). Direct saves pass
    None: a person replacing a memory by hand always wins.
    """
    counts = ReconcileCounts()
    candidates = active_memories(session, scope, NEAR_DUP_CANDIDATES)
    for fact in facts:
        same = (
            _in_scope(session, scope, aliases.get(fact.same_as or -1))
            or find_by_hash(session, scope, fact.content)
            or _near_duplicate(candidates, fact, settings)
        )
        replaced = _in_scope(session, scope, aliases.get(fact.replaces or -1))
        # Both rows are changed below from what was read: lock and re-read them first.
        if same is not None and not lock_memory(session, same):
            same = None
        if replaced is not None and not lock_memory(session, replaced):
            replaced = None
        if same is not None and same.content_hash == content_hash(fact.content):
            replaced = None if replaced is same else replaced
        kw: dict[str, Any] = {
            "actor": actor,
            "batch_id": batch_id,
            "source_turn_ids": source_turn_ids,
        }
        if same is not None and same is not replaced:
            confirm_memory(session, settings, same, fact, now, **kw)
            _add_time(same, fact, said_at)
            counts.confirmed += 1
            kept, created = same, False
        else:
            detail = {**(metadata or {}), **(fact.detail or {})} or None
            kept = create_memory(
                session, settings, scope, fact, now, metadata=detail, said_at=said_at, **kw
            )
            candidates.append(kept)
            counts.created += 1
            created = True
        counts.kept.append(kept)
        if replaced is None or replaced is kept:
            continue
        if said_at is not None and said_at < said_time(replaced):
            # Said before the memory it would replace: that one stays. (A confirmation
            # still counted as evidence; only a new row needs retiring.)
            if created:
                _keep_as_history(session, kept, replaced, now, actor=actor, batch_id=batch_id)
                counts.superseded += 1
            continue
        supersede_memory(session, replaced, kept, now, actor=actor, batch_id=batch_id)
        counts.superseded += 1
    return counts


def said_time(memory: Memory) -> datetime:
    """When a memory's source was said; rows from before said_at existed use created_at."""
    return memory.said_at or memory.created_at


def _add_time(memory: Memory, fact: Fact, said_at: datetime | None) -> None:
    """A confirmation may date a memory later, and give an episode the day it lacked."""
    if said_at is not None and said_at > said_time(memory):
        memory.said_at = said_at
    if memory.occurred_at is None and fact.occurred_at is not None:
        memory.occurred_at = as_day_start(fact.occurred_at)


def _keep_as_history(
    session: Session,
    older: Memory,
    newer: Memory,
    now: datetime,
    *,
    actor: Actor,
    batch_id: int | None,
) -> None:
    """A fact from turns said before the memory it would replace (a dead-lettered batch
    re-driven late, or turns sent out of order): the newer memory stays active, and the
    older fact is kept as what it is, history the newer one superseded. Dropping it would
    lose what the user said; the timeline is what history is for."""
    older.status = MemoryStatus.SUPERSEDED
    older.superseded_by_id = newer.id
    older.updated_at = now
    record_event(
        session,
        older,
        EventKind.SUPERSEDED,
        actor,
        now,
        before=older.content,
        batch_id=batch_id,
        detail={"superseded_by": newer.id, "reason": "said before it"},
    )


def _near_duplicate(candidates: Sequence[Memory], fact: Fact, settings: Settings) -> Memory | None:
    best, best_score = None, settings.near_duplicate_similarity
    for memory in candidates:
        if memory.status != MemoryStatus.ACTIVE or memory.category != fact.category:
            continue
        score = similarity(memory.content, fact.content)
        if score >= best_score:
            best, best_score = memory, score
    return best
