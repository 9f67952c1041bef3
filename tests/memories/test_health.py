"""Memory health figures (seed 004 §6.2): what an operator sees from one call."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from freezegun import freeze_time
from sqlalchemy import event, text
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.extraction.batch import extract_session
from memoryd.memories.health import INDEXED_TURN_STATUSES, count_turns
from memoryd.models.db import utcnow
from memoryd.models.keys import SessionKey
from memoryd.models.tables import Category, TurnStatus
from memoryd.settings import Settings
from testkit import fakellm
from testkit.fakellm import FakeLLM
from tests.conftest import with_llm
from tests.factories import make_memory


def say(settings: Settings, line: str, user: str = "ann", session: str = "s1") -> None:
    client = MemoryClient(settings, dispatch=False)
    client.enqueue_turn(agent_id="bot", user_id=user, session_id=session, role="user", content=line)
    client.end_session("bot", user, session)


def test_empty_store_has_zero_figures(settings: Settings) -> None:
    health = MemoryClient(settings).health("bot", "ann")
    assert (health.active, health.expiring_soon, health.conflicts_resolved) == (0, 0, 0)
    assert (health.failed_turns, health.pending_turns) == (0, 0)
    assert health.by_tier == health.by_status == health.by_category == {}
    assert health.average_confidence is None and health.last_batch_at is None


def test_counts_by_tier_status_category_and_confidence(settings: Settings, db: Session) -> None:
    make_memory(db, settings, "Prefers tea", confidence=0.9)
    make_memory(db, settings, "Release on Friday", confidence=0.7, category=Category.PROJECT)
    make_memory(db, settings, "Is tired today", confidence=0.8, temporary="mood")
    make_memory(db, settings, "Old address", status="superseded")
    make_memory(db, settings, "Forgotten", status="deleted")
    make_memory(db, settings, "Bob's fact", user_id="bob")
    db.commit()
    health = MemoryClient(settings).health("bot", "ann")
    assert health.by_tier == {"long": 1, "short": 2}  # active only
    assert health.by_status == {"active": 3, "superseded": 1, "deleted": 1}
    assert health.by_category == {"user": 2, "project": 1}
    assert health.average_confidence == pytest.approx(0.8)
    assert health.conflicts_resolved == 1
    assert MemoryClient(settings).health().by_status["active"] == 4  # whole store


def test_expiring_soon_is_the_short_tier_within_a_day(settings: Settings, db: Session) -> None:
    now = utcnow()
    make_memory(db, settings, "Mood: tired", temporary="mood", now=now)  # 1-day TTL
    make_memory(db, settings, "Follow up on the invoice", temporary="followup", now=now)  # 3 days
    make_memory(db, settings, "Prefers tea", now=now)  # long tier: never expires
    db.commit()
    client = MemoryClient(settings)
    assert client.health("bot", "ann").expiring_soon == 1
    with freeze_time(now + timedelta(days=2, hours=12)):
        assert client.health("bot", "ann").expiring_soon == 2


def test_failed_turns_and_last_batch_time(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    offline = settings.updated(**{"offline_extractor": True})
    say(offline, "My name is Ann and I prefer green tea.")
    before = utcnow()
    assert extract_session(offline, SessionKey("bot", "ann", "s1")).batches == 1
    health = MemoryClient(settings).health("bot", "ann")
    assert health.last_batch_at is not None and health.last_batch_at >= before
    assert health.failed_turns == 0

    failing = with_llm(settings, fake_llm, max_attempts=1)
    say(failing, "Call me Bob.", user="bob")
    fake_llm.push(fakellm.bad_request())
    extract_session(failing, SessionKey("bot", "bob", "s1"))  # one attempt allowed: dead letter
    assert MemoryClient(settings).health("bot", "bob").failed_turns == 1
    assert MemoryClient(settings).health("bot", "ann").failed_turns == 0  # per scope
    assert MemoryClient(settings).health().failed_turns == 1


@pytest.mark.parametrize("status", INDEXED_TURN_STATUSES)
def test_waiting_and_dead_lettered_turns_are_counted_through_their_indexes(
    settings: Settings, db: Session, status: TurnStatus
) -> None:
    """Health, stats and /metrics never read every turn: turns kept for months of
    retention are done, and these counts only read the few that are not."""
    counted: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "count" in statement and "turns" in statement:
            counted.append(statement)

    engine = db.get_bind()
    event.listen(engine, "before_cursor_execute", record)
    try:
        count_turns(db, status)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    (sql,) = counted
    if engine.dialect.name == "sqlite":
        plan = " ".join(str(r) for r in db.execute(text(f"EXPLAIN QUERY PLAN {sql}")))
        assert f"ix_turns_{status}" in plan, plan
    else:
        db.execute(text("SET LOCAL enable_seqscan = off"))  # an empty table: force the choice
        plan = " ".join(r[0] for r in db.execute(text(f"EXPLAIN {sql}")))
        assert f"ix_turns_{status}" in plan, plan
    db.rollback()
