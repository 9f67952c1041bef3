"""Recall's statements on PostgreSQL keep their index-backed shape whatever the planner's
statistics say. A new user's scope, unknown to the last ANALYZE, is where a plain join
read every posting of the scope; and in a store of a few thousand memories (larger
ones tip the planner back to the index), the feedback's join read every memory."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text, update

from bench.replacement import analyze, store_filler
from memoryd.client import MemoryClient
from memoryd.models.base import readable_users
from memoryd.models.db import get_engine, session_scope
from memoryd.models.keys import Scope
from memoryd.models.tables import Memory
from memoryd.recall import scope_vectors, search
from memoryd.recall.trigrams import prefixes
from memoryd.settings import Settings
from memoryd.text import query_tokens
from testkit.databases import scratch_database
from testkit.plans import generic_plan, indexes_read, sent_with, statements_sent
from tests.conftest import make_settings
from tests.factories import turns_of_months

QUESTION = "Which marathon training plan and vegetarian recipes did the dentist recommend?"


def test_recall_reads_by_index_in_a_new_users_scope(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    settings = make_settings("postgres", tmp_path, request)
    client = MemoryClient(settings, dispatch=False)
    for n in range(3):  # a store of others' memories, settled as autovacuum keeps it
        store_filler(settings, Scope("bench", f"other-{n}"), 500, seed=n)
    analyze(settings)
    newcomer = Scope("bench", "newcomer")  # arrives after the statistics were taken
    store_filler(settings, newcomer, search.SCAN_LIMIT + 300, seed=42)
    client.recall("warm the scope's caches", "bench", "newcomer")

    sent = _sent(settings, lambda: client.recall(QUESTION, "bench", "newcomer"))

    def plan_of(marker: str) -> str:
        (statement, parameters), *_ = [(s, p) for s, p in sent if marker in s]
        return _plan(settings, statement, parameters)

    users = len(readable_users(newcomer))  # the user's own and the shared scope
    # The prefix search: one index range scan per prefix and user, never the scope's
    # postings tested against every range.
    prefix_plan = plan_of("AS bounds")
    assert "Join Filter" not in prefix_plan, prefix_plan
    assert f"loops={len(prefixes(QUESTION)) * users})" in prefix_plan, prefix_plan
    # BM25: one index lookup per term and user, never the scope's postings filtered.
    bm25_plan = plan_of("AS asked")
    assert "Join Filter" not in bm25_plan and "Rows Removed" not in bm25_plan, bm25_plan
    assert f"loops={len(query_tokens(QUESTION)) * users})" in bm25_plan, bm25_plan
    # The usage rows: their memories found by key, never a scan of the store.
    feedback_plan = plan_of("INSERT INTO memory_usage")
    assert "Seq Scan on memories" not in feedback_plan, feedback_plan
    assert "pk_memories" in feedback_plan, feedback_plan


def test_a_store_never_analyzed_reads_each_users_memories_by_index(
    pg_server: str, tmp_path: Path
) -> None:
    """A fresh store, before any ANALYZE (autovacuum not yet round): all its users'
    memories are one agent's, and a planner without statistics took the agent for
    selective, so a scope's reads filtered every memory of the agent by user. Each
    statement over a scope's memories now looks each user up in the index."""
    with scratch_database(pg_server, "memoryd_fresh") as url:
        settings = Settings(data_dir=tmp_path, database_url=url)
        with get_engine(settings.storage).begin() as conn:
            conn.execute(text("ALTER TABLE memories SET (autovacuum_enabled = false)"))
        client = MemoryClient(settings, dispatch=False)
        for n in range(3):
            store_filler(settings, Scope("bench", f"other-{n}"), 500, seed=n)
        store_filler(settings, Scope("bench", "small"), 60, seed=42)  # read whole
        store_filler(settings, Scope("bench", "large"), search.SCAN_LIMIT + 300, seed=43)
        with get_engine(settings.storage).connect() as conn:
            analysed = "SELECT count(*) FROM pg_stats WHERE tablename = 'memories'"
            assert conn.execute(text(analysed)).scalar() == 0  # no statistics yet
        asked = [
            (user, question)
            for user in ("small", "large")
            for question in (QUESTION, "")  # "": the most recent memories
        ] + [("large", "what diet does she follow")]  # a slot: its key's memories
        plans = {
            kind: _plan(settings, statement, parameters)
            for user, question in asked
            for statement, parameters in _sent(
                settings,
                lambda: client.recall(question, "bench", user),  # noqa: B023
            )
            if (kind := _scope_statement(statement)) is not None
        }
    assert set(plans) == {"count", "scope read", "most recent", "by key"}, list(plans)
    for kind, plan in plans.items():
        conditions = re.findall(r"Index Cond: (.*)", plan)
        assert conditions and all("user_id" in c for c in conditions), (kind, plan)
        assert not re.search(r"Filter: .*user_id", plan), (kind, plan)


def _scope_statement(statement: str) -> str | None:
    """Which of recall's reads of a scope's memories `statement` is, if one (the
    postings' searches are the other tests')."""
    if "memory_terms" in statement:
        return None
    kinds = {
        "count(*)": "count",
        "memories.search_text": "scope read",
        "name_key = ANY": "by key",
        "updated_at DESC": "most recent",
    }
    return next((kind for marker, kind in kinds.items() if marker in statement), None)


def _sent(settings: Settings, call: Callable[[], object]) -> list[tuple[str, Any]]:
    """The statements `call` sends through recall's engine, with their parameters."""
    with statements_sent(get_engine(settings.storage, autocommit=True)) as sent:  # recall's
        assert call()
    return sent


def _plan(settings: Settings, statement: str, parameters: Any) -> str:
    with session_scope(settings.storage) as session:  # ANALYZE runs it: roll it back
        found = session.connection().exec_driver_sql(
            f"EXPLAIN (ANALYZE, COSTS OFF) {statement}", parameters
        )
        plan = "\n".join(row[0] for row in found)
        session.rollback()
    return plan


def test_a_question_naming_a_slot_reads_its_keys_by_index_on_sqlite(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The subject keys a question names ("diet") are read through the partial key
    index, not by reading every memory of the scope: SQLite's planner uses that index
    only when the statement states the index's own condition."""
    settings = make_settings("sqlite", tmp_path, request)
    client = MemoryClient(settings, dispatch=False)
    store_filler(settings, Scope("bench", "ann"), search.SCAN_LIMIT + 300, seed=7)
    engine = get_engine(settings.storage)
    with statements_sent(engine) as sent:
        client.recall("what diet does she follow", "bench", "ann")
    statement, parameters = sent_with(sent, "memories.name_key IN")
    with engine.connect() as conn:
        plan = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).all()
    assert "USING INDEX ix_memories_scope_key" in str(plan), plan


def test_the_prepared_key_read_keeps_to_the_key_index_on_postgres(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """psycopg prepares the key read (one text whatever the number of keys) and the
    server then weighs a generic plan, which sees parameters, not values: the partial
    key index is open to it only if the index's condition is written in the text."""
    settings = make_settings("postgres", tmp_path, request)
    client = MemoryClient(settings, dispatch=False)
    for n in range(3):
        store_filler(settings, Scope("bench", f"other-{n}"), 500, seed=n)
    store_filler(settings, Scope("bench", "ann"), search.SCAN_LIMIT + 300, seed=7)
    analyze(settings)

    sent = _sent(settings, lambda: client.recall("what diet does she follow", "bench", "ann"))

    statement, parameters = sent_with(sent, "name_key = ANY")
    plan = generic_plan(settings, statement, parameters)
    assert "ix_memories_scope_key" in plan, plan


def test_the_prepared_vector_stamp_and_listing_keep_to_their_index_on_postgres(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The scope cache's stamp (a count and two sums) and a changed scope's listing of
    ids and versions are read from the partial index of embedded memories, whose
    columns hold all they ask; prepared, their generic plans must still see it."""
    settings = make_settings("postgres", tmp_path, request)
    scope = Scope("bench", "ann")
    for n in range(40):  # a store of many users: each is a small share of it
        store_filler(settings, Scope("bench", f"other-{n}"), 50, seed=n)
    store_filler(settings, scope, 500, seed=42)
    with session_scope(settings.storage) as session:
        session.execute(update(Memory).values(vector=b"\x00\x00\x80?" * 4, vector_version=1))
    analyze(settings)
    with session_scope(settings.storage) as session:
        scope_vectors.scope_vectors(session, settings, scope)  # held, then one changes
        session.execute(update(Memory).where(Memory.user_id == "ann").values(vector_version=2))
        with statements_sent(get_engine(settings.storage)) as sent:
            scope_vectors.scope_vectors(session, settings, scope)
    stamp, listing = (
        next(s for s in sent if marker in s[0] and "memories.vector," not in s[0])
        for marker in ("sum(memories.vector_version)", "memories.vector_version \nFROM")
    )
    for statement, parameters in (stamp, listing):
        plan = generic_plan(settings, statement, parameters)
        assert "ix_memories_scope_vectors" in plan, plan


@pytest.mark.parametrize("backlog", [0, 9000], ids=["no backlog", "a backlog"])
def test_the_prepared_read_of_unextracted_turns_keeps_to_their_indexes_on_postgres(
    tmp_path: Path, request: pytest.FixtureRequest, backlog: int
) -> None:
    """Every recall reads the user's turns not yet extracted: prepared, its generic plan
    must read the small indexes of pending and claimed turns, not walk the thousands of
    turns a user of months has sent, nor, when others' turns wait by the thousand, the
    whole table: with the limit sent as a parameter, the plan then walked the table's
    primary key backward."""
    settings = make_settings("postgres", tmp_path, request)
    client = MemoryClient(settings, dispatch=False)
    turns_of_months(settings, backlog)

    sent = _sent(settings, lambda: client.recall("message 2001", "bot", "ann"))

    statement, parameters = sent_with(sent, "FROM turns")
    plan = generic_plan(settings, statement, parameters)
    read = indexes_read(plan)
    pending = {"ix_turns_pending", "ix_turns_pending_received"}
    assert read & pending and read <= pending | {"ix_turns_claimed"}, plan
    # The backlog's own index only while the backlog is small: it holds every user's.
    assert "ix_turns_pending_received" not in read or not backlog, plan
