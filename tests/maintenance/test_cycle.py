"""Decay, promotion, expiry, archiving and restore, with the clock under control."""

from __future__ import annotations

import math
import threading
from datetime import timedelta

import pytest
from freezegun import freeze_time
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from memoryd.maintenance.cycle import run_cycle
from memoryd.memories.store import restore_memory
from memoryd.memories.weights import effective_weight
from memoryd.models.db import utcnow
from memoryd.models.tables import EventKind, Memory, MemoryEvent, MemoryStatus, Tier
from memoryd.settings import Settings
from tests.factories import make_memory, retrieve

START = "2026-01-01 00:00:00"


def reload(db: Session, memory: Memory) -> Memory:
    db.expire_all()
    fresh = db.get(Memory, memory.id)
    db.commit()
    assert fresh is not None
    return fresh


def events(db: Session, memory: Memory) -> list[str]:
    kinds = list(
        db.scalars(
            select(MemoryEvent.kind)
            .where(MemoryEvent.memory_id == memory.id)
            .order_by(MemoryEvent.id)
        )
    )
    db.commit()
    return kinds


def test_half_life_math(settings: Settings, db: Session) -> None:
    with freeze_time(START):
        memory = make_memory(db, settings)
        now = utcnow()
    one = now + timedelta(days=settings.memories.half_life_long_days)
    assert effective_weight(memory, one, settings.memories) == pytest.approx(0.5)
    assert effective_weight(memory, now + 2 * (one - now), settings.memories) == pytest.approx(0.25)
    short = make_memory(db, settings, "Maybe", confidence=0.7, now=now)
    assert effective_weight(
        short, now + timedelta(days=settings.memories.half_life_short_days), settings.memories
    ) == pytest.approx(0.5)


def test_archive_exactly_when_weight_crosses_the_threshold(settings: Settings, db: Session) -> None:
    with freeze_time(START):
        memory = make_memory(db, settings)
        db.commit()
        start = utcnow()
    days = settings.memories.half_life_long_days * math.log2(
        1.0 / settings.memories.archive_threshold
    )
    due = start + timedelta(days=days)
    assert run_cycle(settings, due - timedelta(seconds=1)).archived == 0
    assert reload(db, memory).status == MemoryStatus.ACTIVE
    assert run_cycle(settings, due).archived == 1
    archived = reload(db, memory)
    assert (archived.status, archived.archived_at) == (MemoryStatus.ARCHIVED, due)
    assert effective_weight(archived, due, settings.memories) == pytest.approx(
        settings.memories.archive_threshold
    )


def test_reinforcement_postpones_archiving(settings: Settings, db: Session) -> None:
    with freeze_time(START):
        memory = make_memory(db, settings)
        start = utcnow()
    first_due = memory.archive_due_at
    assert first_due is not None
    used = start + timedelta(days=100)
    retrieve(db, settings, [memory], used)
    db.commit()
    assert reload(db, memory).archive_due_at == first_due  # recall leaves it as a lower bound

    assert run_cycle(settings, first_due).archived == 0
    rescheduled = reload(db, memory)
    assert rescheduled.status == MemoryStatus.ACTIVE
    assert rescheduled.archive_due_at is not None and rescheduled.archive_due_at > first_due
    true_due = rescheduled.archive_due_at
    assert effective_weight(rescheduled, true_due, settings.memories) == pytest.approx(
        settings.memories.archive_threshold
    )
    assert run_cycle(settings, true_due - timedelta(seconds=1)).archived == 0
    assert run_cycle(settings, true_due).archived == 1
    assert events(db, memory) == [EventKind.CREATED, EventKind.ARCHIVED]


def test_a_sweep_reads_on_past_a_chunk_of_postponed_memories(
    settings: Settings, db: Session
) -> None:
    """Recalled memories come due in the index before they decay: a chunk that only
    reschedules them does not end the run before the decayed ones behind it."""
    with freeze_time(START):
        used = [make_memory(db, settings, f"Used fact {i}") for i in range(3)]
        stale = make_memory(db, settings, "Forgotten fact")
        start = utcnow()
    db.commit()
    retrieve(db, settings, used, start + timedelta(days=100))
    db.commit()
    due = reload(db, stale).archive_due_at
    assert due is not None
    assert run_cycle(settings, due, chunk=2).archived == 1
    assert reload(db, stale).status == MemoryStatus.ARCHIVED
    assert {reload(db, m).status for m in used} == {MemoryStatus.ACTIVE}


def test_promotion_at_exactly_the_access_threshold(settings: Settings, db: Session) -> None:
    memory = make_memory(db, settings, "Plays cello", confidence=0.7)
    assert memory.tier == Tier.SHORT
    now = utcnow()
    db.commit()
    for _ in range(settings.memories.promote_access_count - 1):
        retrieve(db, settings, [memory], now)
    db.commit()
    assert run_cycle(settings, now).promoted == 0
    retrieve(db, settings, [memory], now)
    db.commit()
    assert run_cycle(settings, now).promoted == 1
    promoted = reload(db, memory)
    assert (promoted.tier, promoted.expires_at) == (Tier.LONG, None)
    assert promoted.archive_due_at is not None
    assert events(db, memory) == [EventKind.CREATED, EventKind.PROMOTED]


def test_ttl_expiry_boundaries_and_access_restarts_the_ttl(settings: Settings, db: Session) -> None:
    with freeze_time(START):
        idle = make_memory(db, settings, "Feels tired", confidence=0.7, temporary="mood")
        used = make_memory(db, settings, "Reading Dune", confidence=0.7)
        db.commit()
        start = utcnow()
    assert idle.expires_at == start + timedelta(days=settings.memories.mood_ttl_days)
    assert run_cycle(settings, idle.expires_at - timedelta(seconds=1)).expired == 0
    assert run_cycle(settings, idle.expires_at).expired == 1
    assert reload(db, idle).status == MemoryStatus.EXPIRED

    retrieve(db, settings, [used], start + timedelta(days=6))  # before its TTL
    db.commit()
    assert run_cycle(settings, start + timedelta(days=8)).expired == 0
    assert run_cycle(settings, start + timedelta(days=13)).expired == 1


def test_the_ttl_restarts_in_whole_hours_never_short_of_the_ttl(
    settings: Settings, db: Session
) -> None:
    with freeze_time(START):
        memory = make_memory(db, settings, "Reading Dune", confidence=0.7)
        db.commit()
        start = utcnow()
    ttl = timedelta(days=settings.memories.short_ttl_days)
    first = start + timedelta(days=2, minutes=10)
    retrieve(db, settings, [memory], first)
    db.commit()
    expires = reload(db, memory).expires_at
    assert expires == start + timedelta(days=2, hours=1) + ttl
    retrieve(db, settings, [memory], first + timedelta(minutes=40))
    db.commit()
    assert reload(db, memory).expires_at == expires  # the same hour: the row keeps it
    assert run_cycle(settings, first + ttl).expired == 0
    assert run_cycle(settings, expires).expired == 1


def test_restore_brings_it_back_with_its_history(settings: Settings, db: Session) -> None:
    with freeze_time(START):
        memory = make_memory(db, settings)
        db.commit()
    later = utcnow() + timedelta(days=10_000)
    assert run_cycle(settings, later).archived == 1
    memory = reload(db, memory)
    restore_memory(db, settings.memories, memory, later)
    db.commit()
    memory = reload(db, memory)
    assert memory.status == MemoryStatus.ACTIVE and memory.archived_at is None
    assert events(db, memory) == [EventKind.CREATED, EventKind.ARCHIVED, EventKind.RESTORED]
    assert run_cycle(settings, later).archived == 0  # fresh weight: not archived again at once


def test_superseded_memories_cannot_be_restored(settings: Settings, db: Session) -> None:
    memory = make_memory(db, settings, status=MemoryStatus.SUPERSEDED, superseded_by_id=99)
    with pytest.raises(ValueError, match="superseded by 99"):
        restore_memory(db, settings.memories, memory, utcnow())


def test_two_cycles_at_once_change_nothing_twice(
    backend: str, settings: Settings, db: Session
) -> None:
    with freeze_time(START):
        for i in range(60):
            make_memory(db, settings, f"long fact {i}", user_id=f"u{i}")
            make_memory(db, settings, f"short fact {i}", user_id=f"u{i}", confidence=0.7)
        db.commit()
    later = utcnow() + timedelta(days=10_000)
    results = []
    barrier = threading.Barrier(2)

    def one_run() -> None:
        barrier.wait()
        results.append(run_cycle(settings, later, chunk=7))

    threads = [threading.Thread(target=one_run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(r.archived for r in results) == 60
    assert sum(r.expired for r in results) == 60
    retired = db.scalar(
        select(func.count())
        .select_from(MemoryEvent)
        .where(MemoryEvent.kind.in_([EventKind.ARCHIVED, EventKind.EXPIRED]))
    )
    assert retired == 120  # one event per memory, never two
