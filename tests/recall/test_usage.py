"""What a recall writes: its usage rows, and nothing else; folded by maintenance into
the memory rows, in place."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, select, text
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.maintenance.usage import fold_usage
from memoryd.memories.weights import reinforced, restarted_ttl
from memoryd.models.db import get_engine, utcnow
from memoryd.models.tables import Memory, MemoryUsage, Tier
from memoryd.settings import Settings
from tests.factories import make_memory, retrieve


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_recall_feedback_rewrites_rows_in_place(settings: Settings, db: Session) -> None:
    """No index holds a column that a retrieval changes, so PostgreSQL updates the row
    in place (HOT) and writes no index entry; an index on access_count, weight or the
    like would make every recall write into every index of the table again."""
    settings = settings.updated(**{"promote_access_count": 10})
    long = make_memory(db, settings, "Prefers tea")
    short = make_memory(db, settings, "Reading Dune", confidence=0.7)
    assert (long.tier, short.tier) == (Tier.LONG, Tier.SHORT)
    db.commit()
    hour = utcnow().replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    retrieve(db, settings, [long, short], hour + timedelta(minutes=5))  # TTL moves
    db.commit()
    before = _updates(db)  # in one transaction: no statistics are flushed meanwhile
    for minute in range(10, 40, 10):  # the same hour: every column that changes is unindexed
        retrieve(db, settings, [long, short], hour + timedelta(minutes=minute))
    updated, in_place = (after - then for after, then in zip(_updates(db), before, strict=True))
    assert (updated, in_place) == (6, 6)
    db.commit()
    db.expire_all()
    assert [db.get_one(Memory, m.id).access_count for m in (long, short)] == [4, 4]


def test_a_recall_logs_and_counts_each_hit_as_its_own(settings: Settings, db: Session) -> None:
    """One statement writes all of a recall's usage rows, and the fold all their access
    counts: each memory still gets its own row, count, weight and TTL, never a
    neighbour's. Until the fold, no memory changed."""
    tea = make_memory(db, settings, "Prefers green tea", access_count=4, weight=0.5)
    teapot = make_memory(
        db,
        settings,
        "Bought a clay teapot for green tea",
        confidence=0.7,
        expires_at=utcnow() + timedelta(hours=1),
    )
    house = make_memory(db, settings, "The house green tea is sencha", user_id="*")
    make_memory(db, settings, "Prefers green tea too", user_id="bob")  # another scope
    assert (tea.tier, teapot.tier) == (Tier.LONG, Tier.SHORT)
    db.commit()

    started = utcnow()
    hits = MemoryClient(settings).recall("green tea", "bot", "ann", session_id="s1")

    assert {h.id for h in hits} == {tea.id, teapot.id, house.id}
    db.expire_all()
    usage = db.scalars(select(MemoryUsage).order_by(MemoryUsage.memory_id)).all()
    assert [(u.memory_id, u.agent_id, u.user_id, u.session_id, u.query) for u in usage] == [
        (tea.id, "bot", "ann", "s1", "green tea"),
        (teapot.id, "bot", "ann", "s1", "green tea"),
        (house.id, "bot", "ann", "s1", "green tea"),  # who asked: erasing ann removes it
    ]
    assert {u.memory_id: u.score for u in usage} == {h.id: h.score for h in hits}
    assert all(started <= u.created_at <= utcnow() for u in usage)
    untouched = db.scalars(select(Memory.access_count).where(Memory.agent_id == "bot")).all()
    assert sorted(untouched) == [0, 0, 0, 4]  # bob's too
    db.commit()
    assert fold_usage(settings) == 3
    db.expire_all()
    assert all(u.folded for u in db.scalars(select(MemoryUsage)))
    counted = {m.id: m for m in db.scalars(select(Memory).where(Memory.agent_id == "bot"))}
    assert [counted[m.id].access_count for m in (tea, teapot, house)] == [5, 1, 1]
    assert 0.5 < counted[tea.id].weight < counted[teapot.id].weight  # each its own weight
    assert counted[tea.id].expires_at is None  # long-term: no TTL to restart
    expires_at = counted[teapot.id].expires_at
    assert expires_at is not None and expires_at > utcnow() + timedelta(days=6)  # restarted
    accessed = {counted[m.id].last_accessed_at for m in (tea, teapot, house)}
    assert len(accessed) == 1 and started <= accessed.pop() <= utcnow()  # type: ignore[operator]
    assert fold_usage(settings) == 0  # each row is folded once


def _updates(db: Session) -> tuple[int, int]:
    """Rows of memories updated, and of those in place, as this backend counts them."""
    counts = db.execute(
        text(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables "
            "WHERE relname = 'memories'"
        )
    ).one()
    return int(counts.n_tup_upd), int(counts.n_tup_hot_upd)


def test_a_query_is_logged_exactly_as_asked(settings: Settings, db: Session) -> None:
    """The usage rows carry the query verbatim through the one-statement write: quotes,
    backslashes, braces, commas, newlines and any script, with no NUL (PostgreSQL text
    holds none)."""
    make_memory(db, settings, "Prefers green tea")
    db.commit()
    query = 'green tea {"a", \\"b\\"}, it\'s\n绿茶 🍵 NULL \\N \x00end'
    assert MemoryClient(settings).recall(query, "bot", "ann", session_id='s"1')
    db.expire_all()
    usage = db.scalars(select(MemoryUsage)).one()
    assert (usage.query, usage.session_id) == (query.replace("\x00", ""), 's"1')


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
@pytest.mark.parametrize(
    ("query", "found"),
    [("green tea", 2), ("green tea now", 2), ("green tea now, and where do I live?", 3)],
)
def test_a_recall_writes_only_its_usage_rows_in_one_statement(
    settings: Settings, db: Session, query: str, found: int
) -> None:
    """On PostgreSQL a recall needs no transaction of its own: its reads and its usage
    rows (synchronous_commit off) each commit alone. No BEGIN or COMMIT round trip, no
    row locked, no memory updated: the fold counts the accesses later. A question about
    the present reads nothing more when no two of its hits share a subject key, nor one
    naming a slot ("where do I live?") in a scope read whole."""
    for text_ in ("Prefers green tea", "Bought a clay teapot for green tea", "Lives in Porto"):
        make_memory(db, settings, text_)
    db.commit()
    statements: dict[str, list[str]] = {"transactional": [], "autocommit": []}

    def recorder(kind: str) -> Any:
        def record(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
            statements[kind].append(" ".join(statement.split()))

        return record

    engines = {
        "transactional": get_engine(settings.storage),
        "autocommit": get_engine(settings.storage, autocommit=True),
    }
    listeners = {kind: recorder(kind) for kind in engines}
    for kind, engine in engines.items():
        event.listen(engine, "before_cursor_execute", listeners[kind])
    try:
        hits = MemoryClient(settings).recall(query, "bot", "ann")
    finally:
        for kind, engine in engines.items():
            event.remove(engine, "before_cursor_execute", listeners[kind])
    assert len(hits) == found
    assert statements["transactional"] == []  # nothing ran inside BEGIN ... COMMIT
    ran = statements["autocommit"]
    # The agent's settings, the scope (small: read whole, its BM25 scored in hand), the
    # hits, the usage rows, then the turns not yet extracted (recall/pending.py).
    assert len(ran) == 5, "\n".join(s[:120] for s in ran)
    assert not [s for s in ran if "memory_terms" in s], ran
    assert not [s for s in ran if "FOR UPDATE" in s or "UPDATE memories" in s], ran
    writes = [s for s in ran if "INSERT INTO" in s]
    assert len(writes) == 1 and "memory_usage" in writes[0] and "set_config" in writes[0]
    assert db.scalars(select(Memory.access_count)).all() == [0, 0, 0]
    db.commit()
    fold_usage(settings)
    db.expire_all()
    counts = db.scalars(select(Memory.access_count).order_by(Memory.id)).all()
    # each hit counted once per recall, nothing else
    assert counts == [1] * found + [0] * (3 - found)


def test_the_feedback_computes_what_the_weight_rules_say(settings: Settings, db: Session) -> None:
    """On either database, a folded recall gives each row what weights.reinforced and
    the access rules give for what it held: decay by its tier's half-life from its own weight_at,
    the reinforcement, the ceiling, the TTL restarted to the hour, promotion at the
    count."""
    settings = settings.updated(**{"promote_access_count": 3})
    now = utcnow()
    rows = [
        make_memory(db, settings, "Prefers green tea", weight=1.2),  # long, fresh
        make_memory(
            db, settings, "Green tea at dawn", weight=0.7, weight_at=now - timedelta(days=45)
        ),
        make_memory(db, settings, "Green tea daily", weight=4.99),  # capped at MAX_WEIGHT
        make_memory(
            db,
            settings,
            "Trying green tea this week",
            confidence=0.7,
            weight=0.9,
            weight_at=now - timedelta(days=3, hours=5),
            access_count=2,  # this recall reaches promote_access_count
            expires_at=now + timedelta(hours=2),  # restarted
        ),
        make_memory(
            db,
            settings,
            "Green tea sample box",
            confidence=0.7,
            access_count=0,
            expires_at=now + timedelta(days=30),  # later than a restart: kept
        ),
    ]
    db.commit()
    before = {m.id: (m.tier, m.weight, m.weight_at, m.expires_at, m.access_count) for m in rows}
    retrieve(db, settings, rows, now + timedelta(minutes=1))
    db.commit()
    db.expire_all()
    at = now + timedelta(minutes=1)
    for memory in db.scalars(select(Memory).order_by(Memory.id)):
        tier, weight, weight_at, expires_at, count = before[memory.id]
        expected = reinforced(
            tier, weight, weight_at, settings.memories.reinforce_retrieved, at, settings.memories
        )
        assert memory.weight == pytest.approx(expected["weight"], rel=1e-12), memory.content
        assert (memory.weight_at, memory.last_accessed_at) == (at, at)
        assert memory.access_count == count + 1
        assert memory.expires_at == restarted_ttl(tier, expires_at, at, settings.memories)
        promoted = tier == Tier.SHORT and count + 1 >= 3
        assert memory.promotable_at == (at if promoted else None), memory.content
    assert {m.tier for m in rows} == {Tier.LONG, Tier.SHORT}
