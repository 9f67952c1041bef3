"""Archived memories are purged `archived_retention_days` after archiving, with their
history, usage and postings; one restored meanwhile stays; and the step reads only the
memories it removes, through their partial index, however many others are stored."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event, func, select, update
from sqlalchemy.orm import Session

from bench.replacement import analyze, store_filler
from memoryd.client import MemoryClient
from memoryd.maintenance.cycle import run_cycle
from memoryd.maintenance.retention import purge_archived
from memoryd.memories.transfer import import_memories
from memoryd.models.db import get_engine, session_scope, utcnow
from memoryd.models.keys import Scope
from memoryd.models.tables import (
    Memory,
    MemoryEvent,
    MemoryStatus,
    MemoryTerm,
    MemoryUsage,
)
from memoryd.settings import Settings
from tests.models.test_tallies import assert_tallies_match

AGENT, USER = "bot", "ann"
DAY = timedelta(days=1)
RETENTION = timedelta(days=365)  # the default archived_retention_days
# A new fact used once decays below archive_threshold 299 days on (90 × log2 10).
ARCHIVING = timedelta(days=400)


@pytest.fixture
def store(settings: Settings) -> Settings:
    """Usage rows kept for good, so only the memory's purge can take them."""
    assert settings.memories.archived_retention_days == RETENTION.days
    return settings.updated(**{"usage_retention_days": 0})


def archive(settings: Settings, content: str, at: datetime) -> int:
    """A memory remembered now, recalled once, and archived by the maintenance run at
    `at` (every memory of the scope still active then is archived with it)."""
    client = MemoryClient(settings, dispatch=False)
    memory = client.remember(AGENT, USER, content)
    assert client.recall(content, AGENT, USER)
    assert run_cycle(settings, at).archived >= 1
    assert client.get(AGENT, USER, memory.id).status == MemoryStatus.ARCHIVED
    return memory.id


def left(settings: Settings, memory_id: int) -> dict[str, int]:
    """The memory's rows in each table that holds it."""
    with session_scope(settings.storage, readonly=True) as session:
        return {
            table.__tablename__: session.scalar(
                select(func.count()).select_from(table).where(column == memory_id)
            )
            or 0
            for table, column in (
                (Memory, Memory.id),
                (MemoryEvent, MemoryEvent.memory_id),
                (MemoryUsage, MemoryUsage.memory_id),
                (MemoryTerm, MemoryTerm.memory_id),
            )
        }


def test_an_archived_memory_goes_after_the_retention_with_all_it_left(store: Settings) -> None:
    start = utcnow()
    memory_id = archive(store, "Collects vintage stamps from Lisbon", start + ARCHIVING)
    before = left(store, memory_id)
    # Created and archived; its recall's usage; no postings since it left the active status.
    assert before == {"memories": 1, "memory_events": 2, "memory_usage": 1, "memory_terms": 0}

    assert run_cycle(store, start + ARCHIVING + RETENTION - DAY).archived_purged == 0
    assert left(store, memory_id) == before  # still restorable
    assert run_cycle(store, start + ARCHIVING + RETENTION + DAY).archived_purged == 1
    assert left(store, memory_id) == dict.fromkeys(before, 0)
    with session_scope(store.storage, readonly=True) as session:
        assert_tallies_match(session)  # the whole store's figures lost it too


def test_a_memory_archived_later_stays_until_its_own_retention_ends(store: Settings) -> None:
    start = utcnow()
    first = archive(store, "Collects vintage stamps from Lisbon", start + ARCHIVING)
    second = archive(store, "Plays the cello on Sundays", start + ARCHIVING + 200 * DAY)

    counts = run_cycle(store, start + ARCHIVING + RETENTION + DAY)
    assert counts.archived_purged == 1
    assert left(store, first)["memories"] == 0
    assert left(store, second)["memories"] == 1  # archived 166 days before
    assert run_cycle(store, start + ARCHIVING + RETENTION + 201 * DAY).archived_purged == 1
    assert left(store, second)["memories"] == 0


def test_zero_days_keeps_archived_memories_forever(store: Settings) -> None:
    forever = store.updated(**{"archived_retention_days": 0})
    start = utcnow()
    memory_id = archive(forever, "Collects vintage stamps from Lisbon", start + ARCHIVING)
    before = left(forever, memory_id)
    assert run_cycle(forever, start + ARCHIVING + 10 * RETENTION).archived_purged == 0
    assert left(forever, memory_id) == before


def test_a_restored_memory_stays(store: Settings) -> None:
    start = utcnow()
    memory_id = archive(store, "Collects vintage stamps from Lisbon", start + ARCHIVING)
    client = MemoryClient(store, dispatch=False)
    client.restore(AGENT, USER, memory_id)
    with session_scope(store.storage) as session:
        assert purge_archived(session, store.memories, start + ARCHIVING + 2 * RETENTION, 100) == 0
    assert client.get(AGENT, USER, memory_id).status == MemoryStatus.ACTIVE
    assert [h.id for h in client.recall("vintage stamps", AGENT, USER)] == [memory_id]


def test_a_memory_restored_between_the_read_and_the_delete_stays(store: Settings) -> None:
    """Another process restores the memory after the step read it as due: the DELETE
    checks again, as the restore committed it, and leaves it."""
    start = utcnow()
    memory_id = archive(store, "Collects vintage stamps from Lisbon", start + ARCHIVING)
    engine = get_engine(store.storage)
    mark = "?" if engine.dialect.name == "sqlite" else "%s"
    restore = f"UPDATE memories SET status = 'active', archived_at = NULL WHERE id = {mark}"

    def restore_first(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("DELETE FROM MEMORIES"):
            cursor.connection.cursor().execute(restore, (memory_id,))

    event.listen(engine, "before_cursor_execute", restore_first)
    try:
        with session_scope(store.storage) as session:
            assert (
                purge_archived(session, store.memories, start + ARCHIVING + 2 * RETENTION, 100) == 0
            )
    finally:
        event.remove(engine, "before_cursor_execute", restore_first)
    assert left(store, memory_id)["memories"] == 1


def test_the_step_reads_only_the_memories_it_removes(store: Settings) -> None:
    """5,000 active memories, 20 archived too recently and 3 due: each of the step's
    statements on memories is an index search that meets the 3 due rows alone."""
    now = utcnow()
    store_filler(store, Scope(AGENT, "big"), 5000, seed=1)
    store_filler(store, Scope(AGENT, USER), 23, seed=2)
    with session_scope(store.storage) as session:
        ids = list(
            session.scalars(select(Memory.id).where(Memory.user_id == USER).order_by(Memory.id))
        )
        for memory_id, days in zip(ids, [400, 390, 380, *([10] * 20)], strict=True):
            session.execute(
                update(Memory)
                .where(Memory.id == memory_id)
                .values(status=MemoryStatus.ARCHIVED, archived_at=now - timedelta(days=days))
            )
    analyze(store)
    sent: list[tuple[str, Any]] = []

    def keep(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        if re.match(r"\s*(SELECT|DELETE)\b.*\bmemories\b", statement, re.I | re.S):
            sent.append((statement, parameters))

    engine = get_engine(store.storage)
    event.listen(engine, "before_cursor_execute", keep)
    with session_scope(store.storage) as session:
        try:
            assert purge_archived(session, store.memories, now, 100) == 3
        finally:
            event.remove(engine, "before_cursor_execute", keep)
        session.rollback()  # the plans below run the statements on the same rows
        plans = [plan(session, statement, parameters) for statement, parameters in sent]
        session.rollback()
    assert len(plans) == 2, sent  # the read and the delete
    assert "ix_memories_archived" in plans[0], plans[0]
    for shown in plans:
        if engine.dialect.name == "sqlite":
            assert "SCAN" not in shown, shown  # every table is searched by key
        else:
            assert "Seq Scan" not in shown and "Rows Removed" not in shown, shown
            assert max(int(n) for n in re.findall(r"rows=(\d+)", shown)) == 3, shown


def plan(session: Session, statement: str, parameters: Any) -> str:
    """How the database runs the statement: on PostgreSQL as it ran, with the rows each
    step met (rolled back by the caller)."""
    conn = session.connection()
    if conn.dialect.name == "sqlite":
        rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
        return "\n".join(str(row[-1]) for row in rows)
    explain = "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)"
    rows = conn.exec_driver_sql(f"{explain} {statement}", parameters)
    return "\n".join(row[0] for row in rows)


def test_an_imported_archived_memory_is_purged_a_retention_after_its_import(
    store: Settings,
) -> None:
    """An export does not say when a memory was archived: the copy's retention counts
    from the import, so it neither stays for good nor goes at once."""
    line = {"agent_id": AGENT, "user_id": USER, "content": "Once lived in Lisbon"}
    imported = utcnow()
    result = import_memories(store, [json.dumps(line | {"status": "archived"})], imported)
    assert result["imported"] == 1
    with session_scope(store.storage, readonly=True) as session:
        memory = session.scalars(select(Memory).where(Memory.user_id == USER)).one()
        memory_id = memory.id
        assert (memory.status, memory.archived_at) == (MemoryStatus.ARCHIVED, imported)
    for days, kept in ((RETENTION - DAY, 1), (RETENTION + DAY, 0)):
        with session_scope(store.storage) as session:
            purge_archived(session, store.memories, imported + days, 100)
        assert left(store, memory_id)["memories"] == kept
