"""The sweeper: stranded turns go back, due sessions are found, dead letters re-driven."""

from __future__ import annotations

from datetime import timedelta

from freezegun import freeze_time
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from memoryd.ingest.buffer import end_session
from memoryd.ingest.leases import claim_batch
from memoryd.ingest.sweeper import retry_failed, run_sweep, sessions_due
from memoryd.models.coordination import database_time
from memoryd.models.db import session_scope, utcnow
from memoryd.models.keys import SessionKey, session_pk
from memoryd.models.tables import BatchStatus, ChatSession, ExtractionBatch, Turn, TurnStatus
from memoryd.settings import Settings
from tests.factories import add_turns, count_turns

KEY = SessionKey("bot", "ann", "s1")


def test_sweep_returns_the_turns_of_a_dead_worker(settings: Settings, db: Session) -> None:
    add_turns(settings, 3)
    with session_scope(settings.storage) as session:
        end_session(session, KEY, utcnow())
    with session_scope(settings.storage) as session:
        claim = claim_batch(session, settings.extraction, KEY, database_time(session))
    assert claim is not None
    assert run_sweep(settings).returned_turns == 0  # the lease is live: hands off
    with session_scope(settings.storage) as session:
        now = database_time(session)
    after = now + timedelta(seconds=settings.extraction.lease_seconds + 1)
    result = run_sweep(settings, now=after)
    assert result.returned_turns == 3
    assert result.due == [KEY]  # and the session is triggered again
    assert count_turns(db, TurnStatus.PENDING) == 3
    assert db.scalars(select(Turn.lost_leases)).all() == [1, 1, 1]
    assert db.get(ExtractionBatch, claim.batch_id).status == BatchStatus.ABANDONED  # type: ignore[union-attr]
    attempts = db.scalars(select(Turn.attempts)).all()
    assert attempts == [0, 0, 0]  # a dead worker is not the turns' fault


def test_sweeper_finds_due_sessions(settings: Settings, db: Session) -> None:
    with freeze_time("2026-01-01 12:00:00"):
        add_turns(settings, 2)
        other = SessionKey("bot", "bob", "s9")
        add_turns(settings, settings.extraction.batch_size, user_id="bob", session_id="s9")
        now = utcnow()
    assert sessions_due(db, settings.extraction, now) == [other]  # full batch waiting
    idle = now + timedelta(seconds=settings.extraction.flush_idle_seconds)
    assert sorted(sessions_due(db, settings.extraction, idle)) == sorted([KEY, other])
    # A session backing off after an outage is left alone until its time comes.
    with session_scope(settings.storage) as session:
        session.execute(
            update(ChatSession)
            .where(*session_pk(other))
            .values(retry_at=idle + timedelta(seconds=60))
        )
    db.rollback()
    assert sessions_due(db, settings.extraction, idle) == [KEY]
    assert sorted(sessions_due(db, settings.extraction, idle + timedelta(seconds=61))) == [
        KEY,
        other,
    ]


def _dead_letter(settings: Settings, key: SessionKey, n: int) -> None:
    add_turns(settings, n, user_id=key.user_id, session_id=key.session_id)
    with session_scope(settings.storage) as session:
        session.execute(
            update(Turn)
            .where(Turn.user_id == key.user_id, Turn.session_id == key.session_id)
            .values(status=TurnStatus.FAILED, attempts=settings.extraction.max_attempts)
        )


def test_retry_re_drives_dead_letters_of_the_scope_asked_for_only(
    settings: Settings, db: Session
) -> None:
    ann, bob = SessionKey("bot", "ann", "s1"), SessionKey("bot", "bob", "s2")
    _dead_letter(settings, ann, 2)
    _dead_letter(settings, bob, 3)
    with session_scope(settings.storage) as session:
        assert retry_failed(session, utcnow(), agent_id="bot", user_id="ann") == 2
    assert count_turns(db, TurnStatus.FAILED) == 3  # bob's stay dead-lettered
    assert sessions_due(db, settings.extraction, utcnow()) == [ann]  # marked ended: flushed at once
    db.rollback()
    with session_scope(settings.storage) as session:
        assert retry_failed(session, utcnow(), session_id="nope") == 0
        assert retry_failed(session, utcnow()) == 3
    assert count_turns(db, TurnStatus.PENDING) == 5
    assert db.scalars(select(Turn.attempts).distinct()).all() == [0]
