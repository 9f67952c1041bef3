"""What a recall writes: its feedback changes the memory rows in place."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, select, text
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.models.db import get_engine, session_scope, utcnow
from memoryd.models.keys import Scope
from memoryd.models.tables import Memory, MemoryUsage, Tier
from memoryd.recall.rank import recall
from memoryd.recall.usage import log_retrieval
from memoryd.settings import Settings
from tests.factories import make_memory, retrieve


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_recall_feedback_rewrites_rows_in_place(settings: Settings, db: Session) -> None:
    """No index holds a column that a retrieval changes, so PostgreSQL updates the row
    in place (HOT) and writes no index entry; an index on access_count, weight or the
    like would make every recall write into every index of the table again."""
    settings = settings.model_copy(update={"promote_access_count": 10})
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
    """One statement writes all of a recall's usage rows and another all its access
    counts: each memory still gets its own row, count, weight and TTL, never a
    neighbour's."""
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
    counted = {m.id: m for m in db.scalars(select(Memory).where(Memory.agent_id == "bot"))}
    assert [counted[m.id].access_count for m in (tea, teapot, house)] == [5, 1, 1]
    assert 0.5 < counted[tea.id].weight < counted[teapot.id].weight  # each its own weight
    assert counted[tea.id].expires_at is None  # long-term: no TTL to restart
    expires_at = counted[teapot.id].expires_at
    assert expires_at is not None and expires_at > utcnow() + timedelta(days=6)  # restarted
    accessed = {counted[m.id].last_accessed_at for m in (tea, teapot, house)}
    assert len(accessed) == 1 and started <= accessed.pop() <= utcnow()  # type: ignore[operator]


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
def test_a_recall_writes_its_feedback_in_one_statement(settings: Settings, db: Session) -> None:
    """Recall reads its hits under their row locks with what the feedback is computed
    from, so the feedback reads nothing again: the new counts and weights, the usage rows
    and synchronous_commit off for the transaction go as one statement."""
    for text_ in ("Prefers green tea", "Bought a clay teapot for green tea", "Lives in Porto"):
        make_memory(db, settings, text_)
    db.commit()
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        statements.append(" ".join(statement.split()))

    engine = get_engine(settings)
    event.listen(engine, "before_cursor_execute", record)
    try:
        hits = MemoryClient(settings).recall("green tea", "bot", "ann")
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert len(hits) == 2
    # The agent's settings, the scope (small: read whole), BM25, the hits, the feedback.
    assert len(statements) == 5, statements
    locked = [s for s in statements if "FOR UPDATE" in s]
    markers = ("UPDATE memories", "INSERT INTO", "SET LOCAL")
    writes = [s for s in statements if any(m in s for m in markers)]
    assert len(locked) == 1 and "memories.content" in locked[0]  # the hits' own read
    assert len(writes) == 1 and "UPDATE memories" in writes[0]
    assert "INSERT INTO memory_usage" in writes[0]

    with session_scope(settings) as session:  # the statement relaxes its transaction
        found = recall(session, settings, Scope("bot", "ann"), "tea", now=utcnow(), lock_hits=True)
        log_retrieval(session, settings, Scope("bot", "ann"), found, "tea", None, utcnow())
        assert session.execute(text("SHOW synchronous_commit")).scalar_one() == "off"
    db.expire_all()
    counts = db.scalars(select(Memory.access_count).order_by(Memory.id)).all()
    assert counts == [2, 2, 0]  # each hit counted once per recall, nothing else
