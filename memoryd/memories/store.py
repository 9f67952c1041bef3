"""Writing memories and their history. Every change to a memory goes through here."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.errors import InvalidState, SharedScopeError
from memoryd.memories.proposals import Fact
from memoryd.memories.subjects import key_for
from memoryd.memories.weights import (
    INITIAL_WEIGHT,
    effective_weight,
    reinforce_observed,
    set_weight,
)
from memoryd.models.dialect import locks_rows
from memoryd.models.keys import Scope
from memoryd.models.tables import (
    SHARED_USER,
    Actor,
    EventKind,
    Memory,
    MemoryEvent,
    MemoryStatus,
    Tier,
)
from memoryd.settings import MemorySettings, Settings
from memoryd.text import content_hash, memory_search_text


def check_writable(scope: Scope, shared: bool) -> None:
    """The agent's shared `*` scope is read by all its users, so only a call that says
    `shared=True` may write it; extraction from one user's chat never does."""
    if scope.user_id == SHARED_USER and not shared:
        raise SharedScopeError(
            "user_id '*' is the agent's shared scope, read by all its users: "
            "pass shared=True to write it"
        )


def lock_memory(session: Session, memory: Memory) -> bool:
    """Re-read a loaded memory under its row lock before changing it; False if it is no
    longer active (an edit or maintenance retired it meanwhile)."""
    if locks_rows(session):
        session.refresh(memory, with_for_update=True)
    return memory.status == MemoryStatus.ACTIVE


def set_content(memory: Memory, content: str, name: str | None = None) -> None:
    """The only writer of content: keeps the dedup hash and the search terms in step."""
    memory.content = content
    if name is not None:
        memory.name = name[:200]
    memory.name_key = key_for(memory.name, content)
    memory.content_hash = content_hash(content)
    memory.search_text = memory_search_text(memory.name, content)
    memory.search_length = memory.search_text.count(" ") + 1 if memory.search_text else 0
    memory.vector = None  # re-embedded off the chat path
    memory.embed_failures = 0  # a new text may be one the endpoint takes


def as_day_start(day: date) -> datetime:
    """How a date is stored in a datetime column: midnight UTC, so it reads back as itself."""
    return datetime.combine(day, time(), tzinfo=UTC)


def tier_for(fact: Fact, settings: Settings, now: datetime) -> tuple[Tier, datetime | None]:
    """Long tier for confident, durable facts; short tier with a TTL otherwise."""
    ttl_days = {
        "followup": settings.memories.followup_ttl_days,
        "mood": settings.memories.mood_ttl_days,
    }.get(fact.temporary, settings.memories.short_ttl_days)
    if fact.temporary == "no" and fact.confidence >= settings.extraction.long_term_confidence:
        return Tier.LONG, None
    return Tier.SHORT, now + timedelta(days=ttl_days)


def record_event(
    session: Session,
    memory: Memory,
    kind: EventKind,
    actor: Actor,
    now: datetime,
    *,
    before: str | None = None,
    batch_id: int | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    session.add(
        MemoryEvent(
            memory_id=memory.id,
            agent_id=memory.agent_id,
            user_id=memory.user_id,
            kind=kind,
            actor=actor,
            before_content=before,
            after_content=memory.content,
            batch_id=batch_id,
            detail=detail,
            created_at=now,
        )
    )


def create_memory(
    session: Session,
    settings: Settings,
    scope: Scope,
    fact: Fact,
    now: datetime,
    *,
    actor: Actor,
    batch_id: int | None = None,
    source_turn_ids: list[int] | None = None,
    metadata: dict[str, Any] | None = None,
    force_tier: Tier | None = None,
    said_at: datetime | None = None,
) -> Memory:
    """`said_at`: when its source turns were said (default `now`, a direct save)."""
    tier, expires_at = tier_for(fact, settings, now)
    if force_tier is not None:
        tier, expires_at = force_tier, None if force_tier == Tier.LONG else expires_at
    memory = Memory(
        agent_id=scope.agent_id,
        user_id=scope.user_id,
        category=fact.category,
        tier=tier,
        status=MemoryStatus.ACTIVE,
        name=fact.name[:200],  # its subject key's title, or none
        tags=list(fact.tags),
        confidence=fact.confidence,
        evidence_count=1,
        access_count=0,
        expires_at=expires_at,
        source_turn_ids=list(source_turn_ids or []),
        said_at=said_at or now,
        occurred_at=as_day_start(fact.occurred_at) if fact.occurred_at else None,
        metadata_=metadata,
        created_at=now,
        updated_at=now,
    )
    set_content(memory, fact.content)
    set_weight(memory, INITIAL_WEIGHT, now, settings.memories)
    session.add(memory)
    session.flush()  # assigns the id the event needs
    record_event(session, memory, EventKind.CREATED, actor, now, batch_id=batch_id)
    return memory


def confirm_memory(
    session: Session,
    settings: MemorySettings,
    memory: Memory,
    fact: Fact,
    now: datetime,
    *,
    actor: Actor,
    batch_id: int | None = None,
    source_turn_ids: list[int] | None = None,
) -> None:
    """The fact was observed again: more evidence, more confidence, more weight.

    A re-observed short-tier memory is promoted to the long tier (DESIGN: promotion).
    """
    memory.evidence_count += 1
    # Independent observations: combine as 1 - (1-a)(1-b), capped at 0.99 — but a
    # confirmation never lowers it (an explicit save stored 1.0; seeing it again is no doubt).
    combined = min(0.99, 1 - (1 - memory.confidence) * (1 - fact.confidence))
    memory.confidence = max(memory.confidence, combined)
    reinforce_observed(memory, now, settings)
    memory.source_turn_ids = [*memory.source_turn_ids, *(source_turn_ids or [])][-50:]
    memory.updated_at = now
    record_event(
        session,
        memory,
        EventKind.CONFIRMED,
        actor,
        now,
        batch_id=batch_id,
        detail={"evidence_count": memory.evidence_count},
    )
    if memory.tier == Tier.SHORT and fact.temporary == "no":
        promote_memory(
            session, settings, memory, now, actor=actor, reason="re-observed", batch_id=batch_id
        )


def promote_memory(
    session: Session,
    settings: MemorySettings,
    memory: Memory,
    now: datetime,
    *,
    actor: Actor,
    reason: str,
    batch_id: int | None = None,
) -> None:
    memory.tier = Tier.LONG
    memory.expires_at = None
    memory.updated_at = now
    set_weight(memory, effective_weight(memory, now, settings), now, settings)
    record_event(
        session,
        memory,
        EventKind.PROMOTED,
        actor,
        now,
        batch_id=batch_id,
        detail={"reason": reason},
    )


def supersede_memory(
    session: Session,
    old: Memory,
    new: Memory,
    now: datetime,
    *,
    actor: Actor,
    batch_id: int | None = None,
) -> None:
    """Retire `old` in favour of `new`; linked both ways, never deleted."""
    old.status = MemoryStatus.SUPERSEDED
    old.superseded_by_id = new.id
    old.updated_at = now
    new.supersedes_id = old.id
    record_event(
        session,
        old,
        EventKind.SUPERSEDED,
        actor,
        now,
        before=old.content,
        batch_id=batch_id,
        detail={"superseded_by": new.id, "new_content": new.content},
    )


def find_by_hash(session: Session, scope: Scope, text: str) -> Memory | None:
    return session.scalars(
        select(Memory)
        .where(
            Memory.of(scope),
            Memory.content_hash == content_hash(text),
            Memory.status == MemoryStatus.ACTIVE,
        )
        .order_by(Memory.id)
        .limit(1)
    ).first()


def restore_memory(
    session: Session,
    settings: MemorySettings,
    memory: Memory,
    now: datetime,
    *,
    actor: Actor = Actor.API,
) -> None:
    """Bring an archived, expired or deleted memory back, history intact.

    It comes back with fresh weight (and a fresh TTL on the short tier), so the next
    maintenance run does not retire it again at once.
    """
    if memory.status == MemoryStatus.ACTIVE:
        return
    if memory.status == MemoryStatus.SUPERSEDED:
        raise InvalidState.keyed("memory.superseded", id=memory.id, by=memory.superseded_by_id)
    before = memory.status
    memory.status = MemoryStatus.ACTIVE
    memory.archived_at = None
    memory.updated_at = now
    if memory.tier == Tier.SHORT:
        memory.expires_at = now + timedelta(days=settings.short_ttl_days)
    set_weight(memory, INITIAL_WEIGHT, now, settings)
    record_event(session, memory, EventKind.RESTORED, actor, now, detail={"from": before})
