"""The whole store's memory figures come from tallies the database keeps on every write,
and always equal a count of the memories themselves."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import delete, event, func, select, text, update
from sqlalchemy.orm import Session

from bench.replacement import analyze, store_filler
from memoryd.client import MemoryClient
from memoryd.maintenance.cycle import run_cycle
from memoryd.memories.conflicts import count_open, open_conflicts, resolve
from memoryd.models import tallies
from memoryd.models.db import get_engine, session_scope, utcnow
from memoryd.models.keys import Scope
from memoryd.models.migrate import alembic_config
from memoryd.models.tables import Category, Memory, MemoryStatus, MemoryTally, Tier
from memoryd.settings import Settings
from testkit.plans import generic_plan, sent_with, statements_sent
from tests.conftest import make_settings
from tests.factories import make_memory

Key = tuple[str, str, str]


def counted(session: Session) -> tuple[Counter[Key], Counter[Key]]:
    """Memories and summed confidence per key, counted from the memories."""
    key = (Memory.status, Memory.tier, Memory.category)
    rows = session.execute(select(*key, func.count(), func.sum(Memory.confidence)).group_by(*key))
    memories: Counter[Key] = Counter()
    confidence: Counter[Key] = Counter()
    for status, tier, category, n, summed in rows:
        memories[status, tier, category] = n
        confidence[status, tier, category] = summed
    return memories, confidence


def tallied(session: Session) -> tuple[Counter[Key], Counter[Key]]:
    memories: Counter[Key] = Counter()
    confidence: Counter[Key] = Counter()
    for t in tallies.memory_tallies(session):
        memories[t.status, t.tier, t.category] = t.memories
        confidence[t.status, t.tier, t.category] = t.confidence
    return memories, confidence


def assert_tallies_match(session: Session) -> None:
    memories, confidence = counted(session)
    tallied_memories, tallied_confidence = tallied(session)
    assert tallied_memories == memories
    assert tallied_confidence.keys() == confidence.keys()
    for key, summed in confidence.items():
        assert tallied_confidence[key] == pytest.approx(summed)


def _random_write(session: Session, settings: Settings, rng: random.Random, n: int) -> None:
    ids = session.scalars(select(Memory.id)).all()
    action = rng.choice(["add", "add", "status", "tier", "category", "confidence", "purge"])
    if action == "add" or not ids:
        make_memory(
            session,
            settings,
            f"fact {n} about {rng.choice(['tea', 'Lisbon', 'work', 'cats'])}",
            user_id=rng.choice(["ann", "bob", "eve"]),
            confidence=rng.choice([0.6, 0.75, 0.9, 1.0]),
            category=rng.choice([Category.USER, Category.PROJECT]),
            temporary=rng.choice(["no", "no", "mood"]),
        )
        return
    chosen = rng.sample(ids, k=min(len(ids), rng.randint(1, 5)))
    where = Memory.id.in_(chosen)
    changes: dict[str, Any] = {
        "status": {"status": rng.choice(list(MemoryStatus))},
        "tier": {"tier": rng.choice(list(Tier))},
        "category": {"category": rng.choice(list(Category))},
        "confidence": {"confidence": rng.choice([0.5, 0.8, 0.99])},
        "purge": {},
    }[action]
    if changes:
        session.execute(update(Memory).where(where).values(**changes))
    else:
        session.execute(delete(Memory).where(where))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tallies_equal_the_memories_through_any_writes_and_folds(
    settings: Settings, seed: int
) -> None:
    """Inserts, bulk status, tier, category and confidence changes and hard deletes, in
    random order, folded now and then in small chunks: the tallies always equal a count
    of the memories (three users, both tiers, every status)."""
    rng = random.Random(seed)
    for n in range(120):
        with session_scope(settings.storage) as session:
            _random_write(session, settings, rng, n)
        if n % 17 == 0:
            with session_scope(settings.storage) as session:
                tallies.fold(session, limit=rng.randint(1, 40))  # part of what is there
        with session_scope(settings.storage) as session:
            assert_tallies_match(session)
    run_cycle(settings, chunk=100)  # more than the keys: each chunk folds some changes
    with session_scope(settings.storage) as session:
        assert_tallies_match(session)
        keys = len(counted(session)[0])
        rows = session.scalar(select(func.count()).select_from(MemoryTally))
    assert rows <= keys  # folded: one row per key left, whatever was written


def test_the_whole_store_figures_never_read_the_memories(settings: Settings, db: Session) -> None:
    """What the page and /v1/stats show for the whole store costs what changed since the
    last fold, however many memories are stored."""
    for i in range(30):
        make_memory(db, settings, f"Fact number {i}", status="superseded" if i < 4 else "active")
    db.commit()
    run_cycle(settings)
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    engine = get_engine(settings.storage)
    event.listen(engine, "before_cursor_execute", record)
    try:
        health = MemoryClient(settings).health()
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert health.by_status == {"active": 26, "superseded": 4}
    assert health.average_confidence == pytest.approx(0.95)
    grouped = [s for s in statements if "GROUP BY" in s.upper()]
    assert grouped and all("FROM memory_tallies" in s for s in grouped), grouped


def test_open_conflicts_are_counted_as_listed_up_to_a_cap(settings: Settings, db: Session) -> None:
    """The count agrees with the list (a superseded memory without its replacement, as
    an import leaves it, is in neither), stops at its cap, drops a reviewed pair, and
    on SQLite reads the superseded memories through their index (PostgreSQL's plan, which
    hangs on statistics, is asked of a store of thousands below)."""
    pairs = []
    for i in range(5):
        old = make_memory(db, settings, f"Lives in town {i}")
        new = make_memory(db, settings, f"Moved to city {i}")
        old.status, old.superseded_by_id = MemoryStatus.SUPERSEDED, new.id
        pairs.append(old.id)
    make_memory(db, settings, "Imported history", status="superseded")  # no replacement
    db.commit()
    with session_scope(settings.storage, readonly=True) as session:
        assert count_open(session) == len(open_conflicts(session)) == 5
        assert count_open(session, cap=3) == 3
    with session_scope(settings.storage) as session:
        resolve(session, settings.memories, pairs[0], keep="new", now=utcnow())
    with session_scope(settings.storage, readonly=True) as session:
        assert count_open(session) == 4
    if settings.storage.resolved_database_url.startswith("sqlite"):
        _read_through_the_superseded_index(settings, _sqlite_plan)


def test_open_conflicts_are_read_through_the_superseded_index_in_a_store_of_thousands(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """PostgreSQL with the statistics of a store in service (4,000 memories, one in a
    hundred replaced, half of those reviewed), planning as psycopg's prepared statements
    make it plan: the plan does not hang on what the tests before left in the
    statistics."""
    settings = make_settings("postgres", tmp_path, request)
    store_filler(settings, Scope("bench", "user"), 4000, seed=7)
    with session_scope(settings.storage) as session:
        first = session.scalar(select(func.min(Memory.id)))
        session.execute(
            update(Memory)
            .where(Memory.id.between(first, first + 39))
            .values(status=MemoryStatus.SUPERSEDED, superseded_by_id=Memory.id + 40)
        )
        for old_id in range(first, first + 20):
            resolve(session, settings.memories, old_id, keep="new", now=utcnow())
    analyze(settings)
    with get_engine(settings.storage).connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").execute(
            text("VACUUM (ANALYZE) conflict_reviews")
        )
    with session_scope(settings.storage, readonly=True) as session:
        assert count_open(session) == 20
    _read_through_the_superseded_index(settings, generic_plan)


def _read_through_the_superseded_index(settings: Settings, explain: Any) -> None:
    """`explain(settings, statement, parameters)` of the conflicts' count and list."""

    def plan(read: Any) -> str:
        engine = get_engine(settings.storage)
        with statements_sent(engine) as sent, session_scope(settings.storage, readonly=True) as s:
            read(s)
        return str(explain(settings, *sent_with(sent, "FROM memories")))

    count_plan = plan(count_open)  # as the figures count, up to OPEN_COUNT_CAP
    assert "ix_memories_superseded" in count_plan, count_plan
    # The list, newest first, reads the first page off the same index, without sorting
    # every superseded memory kept (history stays for good).
    list_plan = plan(lambda session: open_conflicts(session, limit=2))
    assert "ix_memories_superseded" in list_plan, list_plan
    assert "Sort" not in list_plan and "TEMP B-TREE" not in list_plan, list_plan


def _sqlite_plan(settings: Settings, statement: str, parameters: Any) -> str:
    with session_scope(settings.storage, readonly=True) as session:
        found = session.connection().exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
        return " ".join(str(row) for row in found)


def test_the_upgrade_starts_the_tallies_from_the_stored_memories(
    settings: Settings, db: Session
) -> None:
    """0022 on a store with memories: the tallies start equal to them, and the triggers
    it installs keep them so."""
    for i in range(12):
        make_memory(db, settings, f"Fact {i}", confidence=0.7 + i / 100)
    db.commit()
    config = alembic_config(settings)
    command.downgrade(config, "0021")
    command.upgrade(config, "head")
    make_memory(db, settings, "Added after the upgrade", status="deleted")
    db.commit()
    with session_scope(settings.storage, readonly=True) as session:
        assert_tallies_match(session)
        assert sum(tallied(session)[0].values()) == 13
