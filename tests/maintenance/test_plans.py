"""Maintenance finds its due rows through the partial indexes of due rows on PostgreSQL
once psycopg has prepared its statements (testkit/plans.py): each cycle costs what is
due, not the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.replacement import analyze, store_filler
from memoryd.maintenance.cycle import run_cycle
from memoryd.models.db import get_engine
from memoryd.models.keys import Scope
from testkit.plans import generic_plan, indexes_read, sent_with, statements_sent
from tests.conftest import make_settings

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
