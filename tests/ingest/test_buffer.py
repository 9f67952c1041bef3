"""Ingest validation, idempotency and batch triggers (buffer.py); claims, leases and the
sweeper (leases.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from freezegun import freeze_time
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.errors import TurnRejected
from memoryd.ingest.buffer import store_turns, validate_turns
from memoryd.ingest.leases import (
    claim_batch,
    finish_turns,
    reap_expired_leases,
    release_lease,
    retry_failed,
    sessions_due,
)
from memoryd.models.db import utcnow
from memoryd.models.keys import SessionKey
from memoryd.models.tables import BatchStatus, ExtractionBatch, Turn, TurnStatus
from memoryd.settings import Settings

KEY = SessionKey("bot", "ann", "s1")


def turn(i: int = 0, **kw: object) -> dict[str, object]:
    base: dict[str, object] = {
        "agent_id": "bot",
        "user_id": "ann",
        "session_id": "s1",
        "role": "user",
        "content": f"message {i}",
    }
    base.update(kw)
    return base


def count_turns(db: Session, status: str | None = None) -> int:
    stmt = select(func.count()).select_from(Turn)
    if status:
        stmt = stmt.where(Turn.status == status)
    return int(db.scalar(stmt) or 0)


BAD_ITEMS = [
    (
        {"agent_id": "bot", "session_id": "s1", "role": "user", "content": "x"},
        "user_id",
        "Field required",
    ),
    (turn(role="robot"), "role", "Input should be"),
    (turn(content=""), "content", "at least 1 character"),
    (turn(content="   \n "), "content", "blank"),
    (turn(content="a\x00b"), "content", "NUL byte"),
    (turn(content="bad \ud800 surrogate"), "content", "unicode"),
    (turn(content=12), "content", "valid string"),
    (turn(agent_id=""), "agent_id", "at least 1 character"),
    (turn(user_id="*"), "user_id", "shared workspace"),
    (turn(timestamp="yesterday"), "timestamp", "datetime"),
    (turn(metadata=[1, 2]), "metadata", "dictionary"),
    (turn(colour="red"), "colour", "Extra inputs"),
]


@pytest.mark.parametrize(("item", "field", "message"), BAD_ITEMS)
def test_bad_turn_names_the_field_and_keeps_the_rest(
    settings: Settings, db: Session, item: dict[str, object], field: str, message: str
) -> None:
    client = MemoryClient(settings, dispatch=False)
    result = client.enqueue_turns([turn(1), item, turn(2)])
    assert result.accepted == 2
    assert [r["index"] for r in result.rejected] == [1]
    errors = result.rejected[0]["errors"]
    assert errors[0]["field"] == field
    assert message in errors[0]["message"]
    assert count_turns(db) == 2
    with pytest.raises(TurnRejected, match=field):
        client.enqueue_turn(item)


def test_huge_content_is_rejected_with_the_limit(settings: Settings, db: Session) -> None:
    client = MemoryClient(settings, dispatch=False)
    with pytest.raises(TurnRejected, match="MEMORYD_MAX_TURN_CHARS"):
        client.enqueue_turn(turn(content="x" * (settings.max_turn_chars + 1)))
    assert count_turns(db) == 0


def test_too_many_turns_in_one_call(settings: Settings) -> None:
    small = settings.model_copy(update={"max_bulk_turns": 3})
    with pytest.raises(TurnRejected, match="MEMORYD_MAX_BULK_TURNS"):
        validate_turns([turn(i) for i in range(4)], small)


def test_payload_shapes_of_the_ingest_task(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    assert client.ingest_payload({"turns": [turn(1), turn(2)]}).accepted == 2
    assert client.ingest_payload(turn(3)).accepted == 1
    assert client.ingest_payload([turn(4)]).accepted == 1
    with pytest.raises(TurnRejected, match="unknown payload keys"):
        client.ingest_payload({"turns": [], "extra": 1})
    with pytest.raises(TurnRejected, match="payload must be"):
        client.ingest_payload("hello")


def test_same_turn_key_twice_stores_one_turn(settings: Settings, db: Session) -> None:
    client = MemoryClient(settings, dispatch=False)
    first = client.enqueue_turn(turn(1, turn_key="k1"))
    again = client.enqueue_turns([turn(1, turn_key="k1"), turn(1, turn_key="k1")])
    assert (first.accepted, again.accepted, again.duplicates) == (1, 0, 2)
    # The key is per scope: another user may use it.
    assert client.enqueue_turn(turn(1, turn_key="k1", user_id="bob")).accepted == 1
    assert count_turns(db) == 2


def test_dispatch_when_pending_turns_cross_batch_size(settings: Settings) -> None:
    small = settings.model_copy(update={"batch_size": 4})
    with small_session(small) as db:
        _, due = store_turns(
            db, small, validate_turns([turn(i) for i in range(3)], small)[0], utcnow()
        )
        assert due == []
        _, due = store_turns(db, small, validate_turns([turn(3)], small)[0], utcnow())
        assert due == [KEY]
        _, due = store_turns(
            db, small, validate_turns([turn(i) for i in range(4, 11)], small)[0], utcnow()
        )
        assert due == [KEY]  # crossed 8 once, not once per turn
        db.rollback()


def small_session(settings: Settings) -> Session:
    from memoryd.models.db import session_factory

    return session_factory(settings)()


def _store(db: Session, settings: Settings, n: int, **kw: object) -> None:
    store_turns(
        db, settings, validate_turns([turn(i, **kw) for i in range(n)], settings)[0], utcnow()
    )
    db.commit()


def test_partial_batch_waits_until_ended_or_idle(settings: Settings, db: Session) -> None:
    _store(db, settings, 3)
    assert claim_batch(db, settings, KEY, utcnow()) is None
    db.rollback()
    later = utcnow() + timedelta(seconds=settings.flush_idle_seconds + 1)
    claim = claim_batch(db, settings, KEY, later)
    assert claim is not None and len(claim.turns) == 3


def test_lease_excludes_a_second_claim_and_expires(settings: Settings, db: Session) -> None:
    small = settings.model_copy(update={"batch_size": 2})
    _store(db, small, 4)
    now = utcnow()
    first = claim_batch(db, small, KEY, now)
    db.commit()
    assert first is not None and [t.content for t in first.turns] == ["message 0", "message 1"]
    assert claim_batch(db, small, KEY, now) is None  # one batch per session at a time
    db.rollback()

    # The worker died: after the lease, the reaper returns its turns with one more attempt.
    after = now + timedelta(seconds=small.lease_seconds + 1)
    assert reap_expired_leases(db, small, after) == 1
    db.commit()
    assert db.scalar(select(func.max(Turn.attempts))) == 1
    batch = db.get(ExtractionBatch, first.batch_id)
    assert batch is not None and batch.status == BatchStatus.ABANDONED
    # The late worker cannot commit its result any more.
    assert release_lease(db, first) is False
    db.rollback()
    second = claim_batch(db, small, KEY, after)
    assert second is not None and [t.id for t in second.turns] == [t.id for t in first.turns]
    finish_turns(db, second)
    assert release_lease(db, second)
    db.commit()
    assert count_turns(db, TurnStatus.DONE) == 2


def test_sweeper_finds_due_sessions(settings: Settings, db: Session) -> None:
    with freeze_time("2026-01-01 12:00:00"):
        _store(db, settings, 2)
        other = SessionKey("bot", "bob", "s9")
        _store(db, settings, settings.batch_size, user_id="bob", session_id="s9")
        now = utcnow()
    assert sessions_due(db, settings, now) == [other]  # full batch waiting
    idle = now + timedelta(seconds=settings.flush_idle_seconds)
    assert sorted(sessions_due(db, settings, idle)) == sorted([KEY, other])


def test_retry_re_drives_dead_letters(settings: Settings, db: Session) -> None:
    one_try = settings.model_copy(update={"max_attempts": 1})
    _store(db, one_try, 2)
    later = utcnow() + timedelta(seconds=one_try.flush_idle_seconds + 1)
    assert claim_batch(db, one_try, KEY, later) is not None
    db.commit()
    reap_expired_leases(db, one_try, later + timedelta(seconds=one_try.lease_seconds + 1))
    db.commit()
    assert count_turns(db, TurnStatus.FAILED) == 2
    assert retry_failed(db, utcnow()) == 2
    db.commit()
    assert count_turns(db, TurnStatus.PENDING) == 2
    assert sessions_due(db, one_try, utcnow()) == [KEY]  # marked ended: flushed at once
