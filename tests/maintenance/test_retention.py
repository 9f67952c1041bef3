"""Retention: the maintenance cycle removes what is past its days, and only that."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import delete, func, select, update

from memoryd.client import MemoryClient
from memoryd.extraction.batch import extract_session
from memoryd.extraction.stats import pipeline_stats
from memoryd.maintenance.cycle import run_cycle
from memoryd.maintenance.retention import _first_young_id
from memoryd.maintenance.usage import fold_usage
from memoryd.models import batch_totals
from memoryd.models.db import session_scope, utcnow
from memoryd.models.keys import SessionKey
from memoryd.models.tables import (
    ChatSession,
    ExtractionBatch,
    Memory,
    MemoryUsage,
    Turn,
    TurnStatus,
)
from memoryd.monitoring.figures import pipeline_figures
from memoryd.settings import Settings
from testkit.fakellm import FakeLLM, bad_request
from tests.conftest import with_llm
from tests.factories import add_turns


def say(client: MemoryClient, session: str, *lines: str) -> SessionKey:
    turns = [
        {"agent_id": "bot", "user_id": "ann", "session_id": session, "role": "user", "content": x}
        for x in lines
    ]
    assert not client.enqueue_turns(turns).rejected
    client.end_session("bot", "ann", session)
    return SessionKey("bot", "ann", session)


def counts(settings: Settings) -> dict[str, int]:
    with session_scope(settings.storage, readonly=True) as session:
        grouped = select(Turn.status, func.count()).group_by(Turn.status)
        turns = {status: n for status, n in session.execute(grouped)}
        return {
            **{str(status): n for status, n in turns.items()},
            "usage": session.scalar(select(func.count()).select_from(MemoryUsage)) or 0,
            "batches": session.scalar(select(func.count()).select_from(ExtractionBatch)) or 0,
            "sessions": session.scalar(select(func.count()).select_from(ChatSession)) or 0,
        }


def access_counts(settings: Settings) -> dict[int, int]:
    with session_scope(settings.storage, readonly=True) as session:
        return {mid: n for mid, n in session.execute(select(Memory.id, Memory.access_count))}


def test_old_turns_usage_and_batches_go_and_dead_letters_and_memories_stay(
    settings: Settings,
) -> None:
    client = MemoryClient(settings, dispatch=False)
    extract_session(settings, say(client, "s1", "I live in Lisbon.", "I prefer green tea."))
    with FakeLLM() as llm:
        llm.push(bad_request())
        extract_session(with_llm(settings, llm, max_attempts=1), say(client, "s2", "Hi there."))
    client.recall("where do I live", "bot", "ann")
    assert fold_usage(settings) == 1
    before = counts(settings)
    assert before == {"done": 2, "failed": 1, "usage": 1, "batches": 2, "sessions": 2}
    accessed = access_counts(settings)
    assert sum(accessed.values()) == 1

    assert run_cycle(settings, utcnow() + timedelta(days=29)).turns_purged == 0
    assert counts(settings) == before  # nothing is due yet
    later = run_cycle(settings, utcnow() + timedelta(days=91))
    assert (later.turns_purged, later.usage_purged, later.batches_purged) == (2, 1, 1)
    # The dead letter, its session and the batch whose error it shows stay; the idle
    # session whose turns all went goes; the memories and their counters are untouched.
    assert counts(settings) == {"failed": 1, "usage": 0, "batches": 1, "sessions": 1}
    assert access_counts(settings) == accessed


def test_a_live_sessions_unsummarised_turns_stay(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    key = say(client, "s1", "I live in Lisbon.", "I prefer green tea.", "I play chess.")
    extract_session(settings, key)
    later = utcnow() + timedelta(days=91)
    with session_scope(settings.storage) as session:
        first = session.scalar(select(func.min(Turn.id)))
        session.execute(  # still talking; compression summarised the first turn only
            update(ChatSession).values(last_activity_at=later, summary_upto=first)
        )
    assert run_cycle(settings, later).turns_purged == 1
    with session_scope(settings.storage, readonly=True) as session:
        left = session.scalars(select(Turn.id).where(Turn.status == TurnStatus.DONE)).all()
    assert first not in left and len(left) == 2


def test_zero_days_keeps_everything(settings: Settings) -> None:
    forever = settings.updated(
        **{
            "turn_retention_days": 0,
            "usage_retention_days": 0,
            "batch_retention_days": 0,
            "deleted_retention_days": 0,
            "archived_retention_days": 0,
        }
    )
    client = MemoryClient(forever, dispatch=False)
    extract_session(forever, say(client, "s1", "I live in Lisbon.", "I prefer green tea."))
    client.recall("Lisbon", "bot", "ann")
    client.forget("bot", "ann", client.list("bot", "ann")[0].id)
    before = counts(forever)
    memories = select(func.count()).select_from(Memory)
    with session_scope(forever.storage, readonly=True) as session:
        stored = session.scalar(memories)
    run_cycle(forever, utcnow() + timedelta(days=3650))
    assert counts(forever) == before
    with session_scope(forever.storage, readonly=True) as session:
        assert stored and session.scalar(memories) == stored  # the deleted one too


def test_old_rows_that_stay_do_not_hold_back_those_behind_them(settings: Settings) -> None:
    """Dead letters are kept however old, and may outnumber what many chunks read (an
    outage's worth, waiting for an operator): a run still reaches the done turns behind
    them, this cycle and every later one."""
    client = MemoryClient(settings, dispatch=False)
    say(client, "dead", *(f"Message {i}." for i in range(60)))
    with session_scope(settings.storage) as session:
        session.execute(update(Turn).values(status=TurnStatus.FAILED))
    extract_session(settings, say(client, "s2", "I live in Lisbon.", "I prefer green tea."))

    counted = run_cycle(settings, utcnow() + timedelta(days=91), chunk=2)  # 30 chunks of them
    assert counted.turns_purged == 2
    assert counts(settings)["failed"] == 60 and "done" not in counts(settings)


def test_the_pipeline_totals_keep_what_purged_batches_recorded(settings: Settings) -> None:
    """`memoryd stats`, /v1/stats and the Prometheus counters read the batches; those
    retention removes leave their figures behind, so no total ever goes back."""
    client = MemoryClient(settings, dispatch=False)
    extract_session(settings, say(client, "s1", "I live in Lisbon.", "I prefer green tea."))
    with FakeLLM() as llm:
        llm.push(bad_request())
        extract_session(with_llm(settings, llm, max_attempts=1), say(client, "s2", "Hi there."))

    def totals() -> tuple[object, ...]:
        stats = pipeline_stats(settings)
        with session_scope(settings.storage, readonly=True) as session:
            figures = pipeline_figures(session, utcnow())
        return (
            stats["batches"], stats["facts_accepted"], stats["last_batch_at"],
            figures.batches, figures.llm_calls,
        )  # fmt: skip

    before = totals()
    assert before[0] == {"done": 1, "failed": 1} and before[1] == 2
    assert run_cycle(settings, utcnow() + timedelta(days=91)).batches_purged == 1
    assert counts(settings)["batches"] == 1  # the dead letter's batch stays
    assert totals() == before


def test_batches_removed_twice_are_counted_once(settings: Settings) -> None:
    """Retention and an erasure may both remove the same batches: the totals take the
    figures of the rows each DELETE removed, so nothing counts twice; a batch still
    running when it goes counts as abandoned, never as running for good."""
    client = MemoryClient(settings, dispatch=False)
    extract_session(settings, say(client, "s1", "I live in Lisbon.", "I prefer green tea."))
    with session_scope(settings.storage) as session:
        session.add(
            ExtractionBatch(
                agent_id="bot", user_id="ann", session_id="s1", started_at=utcnow(), turn_count=1
            )
        )
    with session_scope(settings.storage, readonly=True) as session:
        ids = list(session.scalars(select(ExtractionBatch.id)))
    before = pipeline_stats(settings)
    assert before["batches"] == {"done": 1, "running": 1}
    for _ in range(2):
        with session_scope(settings.storage) as session:
            batch_totals.remove(session, ids)
    after = pipeline_stats(settings)
    assert counts(settings)["batches"] == 0
    assert after["batches"] == {"done": 1, "abandoned": 1}
    assert after["facts_accepted"] == before["facts_accepted"] == 2


def test_the_old_range_is_found_exactly_across_gaps_in_the_ids(settings: Settings) -> None:
    """Ids have gaps (duplicates burn sequence values, erasures delete rows): the bound
    retention reads below holds exactly the rows stored before the cutoff, for every
    cutoff."""
    ids = add_turns(settings, 40)
    start = utcnow() - timedelta(days=400)
    with session_scope(settings.storage) as session:
        gone = ids[:2] + ids[8:14] + ids[20:27] + ids[29::3]  # single gaps and long ones
        session.execute(delete(Turn).where(Turn.id.in_(gone)))
        for n, turn_id in enumerate(ids):
            stored = start + timedelta(days=n)
            session.execute(update(Turn).where(Turn.id == turn_id).values(received_at=stored))
    with session_scope(settings.storage, readonly=True) as session:
        stored_at = dict(session.execute(select(Turn.id, Turn.received_at)).tuples().all())
        for days in range(-1, 42):
            cutoff = start + timedelta(days=days, hours=12)
            bound = _first_young_id(session, Turn, Turn.received_at, cutoff)
            old = {i for i, at in stored_at.items() if at < cutoff}
            assert {i for i in stored_at if bound is None or i < bound} == old, days
