"""LLM faults against the real SDK and a real OpenAI-protocol server: transient faults are
retried, outages back off and trip the circuit without ever dead-lettering a turn,
permanent errors and bugs count attempts, batches stay within the prompt budget, and a
failed batch fails its Celery task."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.errors import BatchFailed
from memoryd.extraction.batch import extract_session
from memoryd.extraction.prompt import TRUNCATED
from memoryd.ingest.sweeper import retry_failed, run_sweep
from memoryd.llm import circuit
from memoryd.models.coordination import database_time
from memoryd.models.db import session_scope, utcnow
from memoryd.models.keys import SessionKey
from memoryd.models.tables import (
    BatchStatus,
    ChatSession,
    Circuit,
    ExtractionBatch,
    FailureKind,
    Memory,
    Turn,
)
from memoryd.settings import Settings
from memoryd.text import estimate_tokens
from testkit import fakellm
from testkit.fakellm import FakeLLM
from tests.conftest import with_llm

KEY = SessionKey("bot", "ann", "s1")


def say(settings: Settings, *lines: str, session: str = "s1") -> SessionKey:
    client = MemoryClient(settings, dispatch=False)
    client.enqueue_turns(
        [
            {
                "agent_id": "bot",
                "user_id": "ann",
                "session_id": session,
                "role": "user",
                "content": c,
            }
            for c in lines
        ]
    )
    client.end_session("bot", "ann", session)
    return SessionKey("bot", "ann", session)


def turn_states(db: Session) -> list[tuple[str, int]]:
    states = [(t.status, t.attempts) for t in db.scalars(select(Turn).order_by(Turn.id))]
    db.commit()  # end the read (a SQLite reader keeps its snapshot until then)
    return states


def batches(db: Session) -> list[ExtractionBatch]:
    rows = list(db.scalars(select(ExtractionBatch).order_by(ExtractionBatch.id)))
    db.commit()  # ends the read without expiring the rows returned
    return rows


def stop_backing_off(settings: Settings) -> None:
    """Let the back-off time pass (on the database's clock)."""
    with session_scope(settings.storage) as session:
        session.execute(update(ChatSession).values(retry_at=database_time(session)))


def close_in_time(settings: Settings) -> None:
    """Let the circuit's open period pass."""
    with session_scope(settings.storage) as session:
        past = database_time(session) - timedelta(seconds=1)
        session.execute(update(Circuit).values(open_until=past))


def circuit_state(settings: Settings) -> circuit.CircuitState:
    with session_scope(settings.storage, readonly=True) as session:
        return circuit.read(session)


# ------------------------------------------------------------------------ transient faults


def test_429_waits_for_retry_after_then_succeeds(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm)
    fake_llm.push(fakellm.rate_limited(retry_after=1))
    stats = extract_session(s, say(s, "Call me Sam."))
    assert stats.created == 1 and fake_llm.calls == 2
    assert fake_llm.arrivals[1] - fake_llm.arrivals[0] >= 0.95  # Retry-After honoured


@pytest.mark.parametrize(
    "fault",
    [
        fakellm.server_error(500),
        fakellm.server_error(503),
        fakellm.slow(3),
        fakellm.malformed(),
        fakellm.truncated(),
        fakellm.not_json(),
        fakellm.not_json("text/html"),
    ],
    ids=["500", "503", "timeout", "malformed", "truncated", "not JSON", "a page"],
)
def test_transient_faults_and_bad_json_recover(
    settings: Settings, db: Session, fake_llm: FakeLLM, fault: fakellm.Action
) -> None:
    s = with_llm(settings, fake_llm, llm_timeout_seconds=1.0)
    fake_llm.push(fault)
    stats = extract_session(s, say(s, "Call me Sam."))
    assert (stats.created, stats.failed_batches) == (1, 0)
    assert fake_llm.calls == 2
    assert turn_states(db) == [("done", 0)]
    repaired = fault.status == 200 and fault.delay == 0 and fault.raw is None
    expected_calls = 2 if repaired else 1  # a repair round for an answer that is not valid
    assert batches(db)[0].llm_calls == expected_calls


# ---------------------------------------------------------------------------------- outages


@pytest.mark.parametrize(
    "fault",
    [fakellm.server_error(503), fakellm.not_json(), fakellm.not_json("text/html")],
    ids=["503", "not JSON", "a page"],
)
def test_an_outage_backs_off_and_never_dead_letters(
    settings: Settings, db: Session, fake_llm: FakeLLM, fault: fakellm.Action
) -> None:
    """Also a web page where the API should answer (a proxy's): it was taken for a bug,
    which counts the turns' attempts."""
    s = with_llm(settings, fake_llm, llm_retries=1, max_attempts=2)
    key = say(s, "Call me Sam.", "I live in Rome.")
    for round_ in range(5):  # five outages in a row: more than max_attempts
        fake_llm.push(*[fault] * 2)
        stats = extract_session(s, key)
        assert (stats.failed_batches, stats.dead_lettered) == (1, 0)
        assert turn_states(db) == [("pending", 0), ("pending", 0)]
        calls = fake_llm.calls
        assert extract_session(s, key).batches == 0  # backing off: no call at all
        assert run_sweep(s).due == []  # nor does the sweeper trigger it
        assert fake_llm.calls == calls
        with session_scope(s.storage, readonly=True) as session:
            chat = session.scalars(select(ChatSession)).one()
            assert chat.transient_failures == round_ + 1
            assert chat.retry_at is not None and chat.retry_at > database_time(session)
        stop_backing_off(s)
        close_in_time(s)
    assert {b.error_kind for b in batches(db)} == {FailureKind.TRANSIENT}
    assert extract_session(s, key).created == 2  # the endpoint is back
    assert turn_states(db) == [("done", 0), ("done", 0)]
    with session_scope(s.storage, readonly=True) as session:
        assert session.scalars(select(ChatSession.transient_failures)).one() == 0


@pytest.mark.parametrize("status", [401, 403, 404])
def test_an_endpoint_refusing_every_request_is_an_outage_not_the_turns_fault(
    settings: Settings, db: Session, fake_llm: FakeLLM, status: int
) -> None:
    """A revoked key, or a model or path that is not there: every batch split down
    to single turns and dead-lettered them all after max_attempts. Now the turns wait,
    the circuit counts it, and they are extracted once the endpoint answers again."""
    s = with_llm(settings, fake_llm, max_attempts=2)
    key = say(s, "Call me Sam.", "I live in Rome.")
    for _ in range(3):  # more than max_attempts
        fake_llm.push(fakellm.server_error(status))
        stats = extract_session(s, key)
        assert (stats.failed_batches, stats.dead_lettered) == (1, 0)
        assert turn_states(db) == [("pending", 0), ("pending", 0)]
        assert str(status) in (batches(db)[-1].error or "")
        stop_backing_off(s)
        close_in_time(s)
    assert circuit_state(s).failures >= 1
    assert {b.error_kind for b in batches(db)} == {FailureKind.TRANSIENT}
    assert extract_session(s, key).created == 2  # the key is fixed
    assert turn_states(db) == [("done", 0), ("done", 0)]


def test_the_circuit_opens_on_an_outage_and_one_probe_closes_it(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm, llm_retries=0, circuit_failure_threshold=2)
    keys = [say(s, f"Call me Sam {i}.", session=f"s{i}") for i in range(4)]
    fake_llm.push(*[fakellm.server_error(500)] * 2)
    for key in keys[:2]:
        assert extract_session(s, key).failed_batches == 1
    assert circuit_state(s).failures == 2
    calls = fake_llm.calls
    # Open: nobody calls the endpoint, and the sweeper triggers nothing.
    stats = extract_session(s, keys[2])
    assert stats.circuit_open and stats.batches == 0 and fake_llm.calls == calls
    assert run_sweep(s).circuit_open
    # Half-open: the first caller probes; a second one stays away meanwhile.
    close_in_time(s)
    assert len(run_sweep(s).due) == 1  # the sweeper triggers a single probe
    with session_scope(s.storage) as session:
        now = database_time(session)
        state = circuit.read(session)
        assert state.is_half_open(now, s.extraction)
        assert circuit.take_probe(session, s.extraction, state, now)
    assert extract_session(s, keys[3]).circuit_open  # the probe slot is taken
    close_in_time(s)
    stats = extract_session(s, keys[2])  # this one probes, and the endpoint answers
    assert (stats.created, stats.circuit_open, stats.circuit_closed) == (1, False, True)
    assert circuit_state(s).failures == 0  # its task sends a sweep: the rest go at once
    later = extract_session(s, keys[3])  # closed again: calls flow
    assert (later.created, later.circuit_closed) == (1, False)


def test_a_failed_probe_opens_the_circuit_for_longer(settings: Settings, fake_llm: FakeLLM) -> None:
    s = with_llm(
        settings, fake_llm, llm_retries=0, circuit_failure_threshold=1, circuit_open_max_seconds=300
    )
    key = say(s, "Call me Sam.")
    fake_llm.push(fakellm.server_error(500))
    extract_session(s, key)
    first = circuit_state(s)
    close_in_time(s)
    stop_backing_off(s)
    fake_llm.push(fakellm.server_error(500))
    assert extract_session(s, key).failed_batches == 1  # the probe failed
    second = circuit_state(s)
    assert second.failures == 2 and first.open_until and second.open_until
    with session_scope(s.storage, readonly=True) as session:
        now = database_time(session)
    opened_for = (second.open_until - now).total_seconds()
    assert (
        s.extraction.circuit_open_seconds * 1.5
        < opened_for
        <= s.extraction.circuit_open_seconds * 2
    )


# --------------------------------------------------------------------- permanent failures


def test_permanent_error_counts_attempts_then_dead_letters(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm, max_attempts=2)
    key = say(s, "Call me Sam.")
    fake_llm.push(fakellm.bad_request())
    assert extract_session(s, key).failed_batches == 1
    assert fake_llm.calls == 1  # a 400 is not retried
    assert turn_states(db) == [("pending", 1)]
    fake_llm.push(fakellm.bad_request())
    assert extract_session(s, key).dead_lettered == 1  # no back-off for permanent errors
    assert turn_states(db) == [("failed", 2)]  # dead letter, kept
    assert extract_session(s, key).batches == 0  # nothing left to claim
    assert [(b.status, b.error_kind) for b in batches(db)] == [
        (BatchStatus.FAILED, FailureKind.PERMANENT)
    ] * 2
    assert "400" in (batches(db)[0].error or "")
    assert circuit_state(s).failures == 0  # a bad request says nothing about an outage

    with session_scope(s.storage) as session:
        assert retry_failed(session, utcnow()) == 1  # `memoryd retry`
    assert extract_session(s, key).created == 1
    assert turn_states(db) == [("done", 0)]


def test_unparseable_twice_is_a_permanent_error(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm)
    fake_llm.push(fakellm.malformed(), fakellm.malformed())
    stats = extract_session(s, say(s, "Call me Sam."))
    assert stats.failed_batches == 1
    batch = batches(db)[0]
    assert batch.status == BatchStatus.FAILED and "not valid" in (batch.error or "")
    assert batch.error_kind == FailureKind.PERMANENT
    assert turn_states(db) == [("pending", 1)]


class _BrokenExtractor:
    """An extractor with a bug: it raises something that is not an LLM error."""

    uses_llm = False

    def extract(
        self, turns: object, memories: object, profiles: object = None, keys: object = ()
    ) -> object:
        raise ZeroDivisionError("bug in the extractor")


def test_unexpected_extractor_error_fails_the_batch_at_once(
    settings: Settings, db: Session
) -> None:
    s = settings.updated(**{"max_attempts": 2, "lease_seconds": 3600})
    key = say(s, "Call me Sam.")
    with pytest.raises(ZeroDivisionError):
        extract_session(s, key, extractor=_BrokenExtractor())  # type: ignore[arg-type]
    batch = batches(db)[0]
    assert (batch.status, batch.error_kind) == (BatchStatus.FAILED, FailureKind.BUG)
    # The type and where it was raised; not its message, which may quote what was said.
    assert (batch.error or "").startswith("unexpected ZeroDivisionError in extract (")
    assert turn_states(db) == [("pending", 1)]  # returned now, not after the hour-long lease
    # The lease is free: a working extractor picks the turn up right away.
    assert extract_session(s, key).created == 1
    assert turn_states(db) == [("done", 1)]


# -------------------------------------------------------------------------- prompt budget


def test_batches_stay_within_the_prompt_budget(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    """Long turns make smaller batches; no prompt is ever over extract_max_prompt_tokens."""
    s = with_llm(settings, fake_llm, extract_max_prompt_tokens=1500, extract_memory_tokens=300)
    lines = [f"Remember that fact {i} is " + "quite long. " * (i * 7 % 60) for i in range(40)]
    key = say(s, *lines)
    while extract_session(s, key).batches:
        pass
    assert turn_states(db) == [("done", 0)] * 40
    sizes = [b.turn_count for b in batches(db)]
    assert len(sizes) > 2 and max(sizes) < s.extraction.batch_size  # cut by tokens, not by count
    for request in fake_llm.requests:
        prompt = sum(estimate_tokens(m["content"]) + 4 for m in request["messages"])
        assert prompt <= s.extraction.extract_max_prompt_tokens


def test_a_turn_longer_than_the_budget_alone_is_cut_for_extraction_and_flagged(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm, extract_max_prompt_tokens=1200, extract_memory_tokens=100)
    huge = "Call me Sam. " + "and so on " * 2000
    say(s, huge, "I live in Rome.")
    while extract_session(s, KEY).batches:
        pass
    first, second = batches(db)
    assert (first.turn_count, first.truncated_turns) == (1, 1)
    assert (second.turn_count, second.truncated_turns) == (1, 0)
    seen = fake_llm.requests[0]["messages"][1]["content"]
    assert TRUNCATED in seen and len(seen) < len(huge)
    assert db.scalars(select(Turn.content).order_by(Turn.id)).first() == huge  # kept whole
    contents = set(db.scalars(select(Memory.content)))
    assert contents == {"Wants to be called Sam", "Lives in Rome"}


# ------------------------------------------------------------------------ visible failure


def test_the_extraction_task_fails_when_its_batch_failed(
    settings: Settings, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bookkeeping is done (turns kept, batch recorded) and then the Celery task ends
    in FAILURE, which is what task events and Flower show."""
    from memoryd.tasks import extraction as task_module

    s = with_llm(settings, fake_llm, llm_retries=0)
    monkeypatch.setattr(task_module, "get_settings", lambda: s)
    key = say(s, "Call me Sam.")
    fake_llm.push(fakellm.server_error(500))
    failed = task_module.extract_session.apply(args=key.as_args())
    assert failed.state == "FAILURE"
    assert isinstance(failed.result, BatchFailed)
    assert "transient" in str(failed.result) and "500" in str(failed.result)
    stop_backing_off(s)
    ok: Any = task_module.extract_session.apply(args=key.as_args())
    assert ok.state == "SUCCESS" and ok.result["created"] == 1
