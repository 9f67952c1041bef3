"""Maintenance finds its due rows through the partial indexes of due rows on PostgreSQL
once psycopg has prepared its statements (testkit/plans.py): each cycle costs what is
due, not the store. Retention reads the old turns by the primary key's old range: a
cycle in a store of months costs the rows it removes and the old ones it keeps, not
every turn ever sent."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import text, update

from bench.replacement import analyze, store_filler
from memoryd.maintenance.cycle import run_cycle
from memoryd.maintenance.retention import purge_turns
from memoryd.models.db import get_engine, session_scope, utcnow
from memoryd.models.keys import Scope
from memoryd.models.tables import ChatSession, Turn, TurnStatus
from testkit.plans import generic_plan, indexes_read, sent_with, statements_sent
from tests.conftest import make_settings
from tests.factories import turns_of_months

# Each due-row read of the cycle (a marker of its text) and the index it must read.
DUE_READS = {
    "memories.promotable_at IS NOT NULL": "ix_memories_promotion_due",
    "ORDER BY memories.expires_at": "ix_memories_expiry_due",
    "ORDER BY memories.archive_due_at": "ix_memories_archive_due",
    "memories.status = 'deleted'": "ix_memories_deleted",
    "memories.status = 'archived'": "ix_memories_archived",
}


def test_the_cycles_due_rows_are_read_through_their_partial_indexes(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    settings = make_settings("postgres", tmp_path, request)
    for n in range(40):  # a store of many users' memories, none of them due
        store_filler(settings, Scope("bench", f"user-{n}"), 100, seed=n)
    analyze(settings)
    with statements_sent(get_engine(settings.storage)) as sent:
        run_cycle(settings)

    for marker, index in DUE_READS.items():
        statement, parameters = sent_with(sent, marker, "FROM memories")
        plan = generic_plan(settings, statement, parameters)
        assert index in indexes_read(plan), (marker, plan)


def test_retentions_read_of_old_turns_keeps_to_their_range_of_the_primary_key(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    settings = make_settings("postgres", tmp_path, request)
    turns_of_months(settings)  # 4,003 turns, all received just now
    now = utcnow()
    long_ago = now - timedelta(days=100)
    with session_scope(settings.storage) as session:  # the first 1,500 said long ago
        long_ago_turns = update(Turn).where(Turn.id <= 1500)
        session.execute(long_ago_turns.values(created_at=long_ago, received_at=long_ago))
        session.execute(update(Turn).where(Turn.id <= 1000).values(status=TurnStatus.FAILED))
        session.execute(update(ChatSession).values(last_activity_at=long_ago))
    with get_engine(settings.storage).connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("VACUUM ANALYZE turns"))

    engine = get_engine(settings.storage)
    with session_scope(settings.storage) as session, statements_sent(engine) as sent:
        # 1,000 dead letters kept ahead of the 500 done turns that go, 10 at a time
        assert purge_turns(session, settings.memories, now, 10) == 10

    statement, parameters = sent_with(sent, "FROM turns LEFT OUTER JOIN sessions")
    plan = generic_plan(settings, statement, parameters)
    read = indexes_read(plan)
    assert "pk_turns" in read and "seq scan of turns" not in read and "Sort" not in plan, plan
    # _first_young_id's probes: by the primary key alone
    probes = [(s, p) for s, p in sent if "FROM turns" in s and "sessions" not in s]
    assert probes
    for probe, values in probes:
        assert indexes_read(generic_plan(settings, probe, values)) == {"pk_turns"}, probe


def test_a_run_reads_the_old_turns_it_keeps_once_not_once_a_chunk(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Dead letters kept ahead of the done turns are read by a run's first chunk only:
    each chunk reads on from where the last one stopped, so a run of many chunks costs
    the rows it removes and the kept ones once."""
    settings = make_settings("postgres", tmp_path, request)
    turns_of_months(settings)
    now = utcnow()
    long_ago = now - timedelta(days=100)
    with session_scope(settings.storage) as session:  # 1,000 dead letters, then 500 done
        long_ago_turns = update(Turn).where(Turn.id <= 1500)
        session.execute(long_ago_turns.values(created_at=long_ago, received_at=long_ago))
        session.execute(update(Turn).where(Turn.id <= 1000).values(status=TurnStatus.FAILED))
        session.execute(update(ChatSession).values(last_activity_at=long_ago))

    engine = get_engine(settings.storage)
    with statements_sent(engine) as sent:
        assert run_cycle(settings, now, chunk=100).turns_purged == 500

    reads = [(s, p) for s, p in sent if "FROM turns LEFT OUTER JOIN sessions" in s]
    assert len(reads) == 6, reads  # five chunks of 100 and the one that found none
    # Each chunk's read again, as sent, over the turns that stayed: the rows it reads
    # and drops are the dead letters in its range.
    dropped = [
        sum(map(int, re.findall(r"Rows Removed by (?:Join )?Filter: (\d+)", plan)))
        for plan in (
            generic_plan(settings, s, p, "ANALYZE, COSTS OFF, TIMING OFF") for s, p in reads
        )
    ]
    assert dropped == [1000, 0, 0, 0, 0, 0], dropped
    # _first_young_id once a run: the newest and oldest rows, then halving 4,003 ids
    probes = [s for s, _ in sent if s.startswith("SELECT turns.id, turns.received_at")]
    assert 2 < len(probes) <= 2 + 12, probes
