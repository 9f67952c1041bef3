"""Folding recalls' usage rows: each retrieval applied as it would have been at its own
time, once, read through the index of unfolded rows; the cycle folds before it decides."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from freezegun import freeze_time
from sqlalchemy import event, func, insert, select, text
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.maintenance.cycle import run_cycle
from memoryd.maintenance.usage import fold_usage
from memoryd.memories.weights import reinforced, restarted_ttl
from memoryd.models.db import get_engine, session_scope, utcnow
from memoryd.models.tables import Memory, MemoryUsage, Tier
from memoryd.settings import Settings
from tests.factories import make_memory


def test_retrievals_folded_later_count_as_if_applied_when_they_happened(
    settings: Settings, db: Session
) -> None:
    """Three recalls days apart, folded at once a week later: the weight decays and is
    reinforced step by step from each recall's time, the TTL restarts from the last one,
    and promotion dates from the recall that reached the count."""
    settings = settings.updated(**{"promote_access_count": 2})
    start = utcnow()
    memory = make_memory(db, settings, "Learning the cello", confidence=0.7, now=start)
    db.commit()
    assert memory.tier == Tier.SHORT
    weight, weight_at, expires_at = memory.weight, memory.weight_at, memory.expires_at
    times = [start + timedelta(days=d, hours=h) for d, h in ((1, 2), (2, 7), (4, 1))]
    client = MemoryClient(settings, dispatch=False)
    for at in times:
        with freeze_time(at):
            assert [h.id for h in client.recall("cello", "bot", "ann")] == [memory.id]
    with freeze_time(start + timedelta(days=11)):
        assert fold_usage(settings) == 3
    for at in times:
        step = reinforced(
            Tier.SHORT,
            weight,
            weight_at,
            settings.memories.reinforce_retrieved,
            at,
            settings.memories,
        )
        weight, weight_at = step["weight"], step["weight_at"]
        expires_at = restarted_ttl(Tier.SHORT, expires_at, at, settings.memories)
    db.expire_all()
    folded = db.get_one(Memory, memory.id)
    assert folded.weight == pytest.approx(weight, rel=1e-9)
    assert (folded.weight_at, folded.last_accessed_at) == (times[-1], times[-1])
    assert (folded.access_count, folded.expires_at) == (3, expires_at)
    assert folded.promotable_at == times[1]  # the second recall reached the count
    # A recall's row that committed late, stamped before the others: counted, and the
    # last access stays the latest.
    row = {"memory_id": memory.id, "agent_id": "bot", "user_id": "ann", "query": "cello"}
    db.execute(insert(MemoryUsage), [row | {"created_at": times[0]}])
    db.commit()
    assert fold_usage(settings) == 1
    db.expire_all()
    late = db.get_one(Memory, memory.id)
    assert (late.access_count, late.last_accessed_at) == (4, times[-1])


def test_the_cycle_folds_before_it_promotes(settings: Settings, db: Session) -> None:
    """Recalls made before a maintenance cycle promote the memory in that cycle."""
    memory = make_memory(db, settings, "Learning the cello", confidence=0.7)
    db.commit()
    client = MemoryClient(settings, dispatch=False)
    for _ in range(settings.memories.promote_access_count):
        client.recall("cello", "bot", "ann")
    counts = run_cycle(settings)
    assert (counts.usage_folded, counts.promoted) == (settings.memories.promote_access_count, 1)
    db.expire_all()
    assert db.get_one(Memory, memory.id).tier == Tier.LONG


def test_a_fold_reads_the_unfolded_rows_by_index(
    backend: str, settings: Settings, db: Session
) -> None:
    """A year of folded usage rows costs a fold nothing: it reads the recalls made since
    the last one through their partial index, never a scan of the usage table."""
    memory = make_memory(db, settings, "Prefers tea")
    now = utcnow()
    row: dict[str, Any] = {"memory_id": memory.id, "agent_id": "bot", "user_id": "ann",
                           "query": "tea", "created_at": now, "folded": True}  # fmt: skip
    db.execute(insert(MemoryUsage), [row] * 20_000 + [row | {"folded": False}] * 3)
    db.commit()
    db.execute(text("ANALYZE memory_usage" if backend == "postgres" else "ANALYZE"))
    db.commit()
    sent: list[tuple[str, Any]] = []

    def keep(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        sent.append((statement, parameters))

    event.listen(get_engine(settings.storage), "before_cursor_execute", keep)
    try:
        assert fold_usage(settings) == 3
    finally:
        event.remove(get_engine(settings.storage), "before_cursor_execute", keep)
    (read, parameters), *_ = [(s, p) for s, p in sent if "FROM memory_usage" in s]
    with session_scope(settings.storage) as session:
        explain = "EXPLAIN" if backend == "postgres" else "EXPLAIN QUERY PLAN"
        found = session.connection().exec_driver_sql(f"{explain} {read}", parameters)
        plan = "\n".join(str(r[-1]) for r in found)
    assert "ix_memory_usage_unfolded" in plan, plan
    assert "Seq Scan" not in plan and not re.search(r"SCAN memory_usage(?! USING)", plan), plan
    unfolded = db.scalar(select(func.count()).where(MemoryUsage.folded.is_(False)))
    assert unfolded == 0
    db.expire_all()
    assert db.get_one(Memory, memory.id).access_count == 3
