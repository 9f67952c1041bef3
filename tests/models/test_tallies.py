"""The whole store's memory figures come from tallies the database keeps on every write,
and always equal a count of the memories themselves."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from alembic import command
from sqlalchemy import delete, event, func, select, text, update
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.maintenance.cycle import run_cycle
from memoryd.memories.conflicts import count_open, open_conflicts, resolve
from memoryd.models import tallies
from memoryd.models.db import get_engine, session_scope, utcnow
from memoryd.models.migrate import alembic_config
from memoryd.models.tables import Category, Memory, MemoryStatus, MemoryTally, Tier
from memoryd.settings import Settings
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
    reads the superseded memories through their index."""
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
    count_plan = _plan(settings, lambda session: count_open(session, cap=3), "count(")
    assert "ix_memories_superseded" in count_plan, count_plan
    # The list, newest first, reads the first page off the same index, without sorting
    # every superseded memory kept (history stays for good).
    list_plan = _plan(settings, lambda session: open_conflicts(session, limit=2), "ORDER BY")
    assert "ix_memories_superseded" in list_plan, list_plan
    assert "Sort" not in list_plan and "TEMP B-TREE" not in list_plan, list_plan


def _plan(settings: Settings, read: Any, marker: str) -> str:
    """The plan of the statement holding `marker` that `read(session)` sends."""
    executed: list[tuple[str, Any]] = []
    engine = get_engine(settings.storage)

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        executed.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", record)
    with session_scope(settings.storage, readonly=True) as session:
        read(session)
        event.remove(engine, "before_cursor_execute", record)
        ((sql, parameters),) = [(s, p) for s, p in executed if marker in s]
        if engine.dialect.name == "sqlite":
            explain = "EXPLAIN QUERY PLAN"
        else:
            explain = "EXPLAIN"
            # A tiny table whose statistics vary with the tests before: ask only whether
            # the index can serve the read (and its order), not which plan is cheapest now.
            for method in ("seqscan", "bitmapscan", "sort"):
                session.execute(text(f"SET LOCAL enable_{method} = off"))
        found = session.connection().exec_driver_sql(f"{explain} {sql}", parameters)
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
