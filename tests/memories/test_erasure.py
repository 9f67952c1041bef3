"""Erasure: after erasing a scope, no row of any table holds its ids or anything it
wrote, and every other scope's rows are exactly as they were."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import select

from memoryd.client import MemoryClient
from memoryd.extraction.batch import extract_session
from memoryd.extraction.stats import pipeline_stats
from memoryd.maintenance.retention import purge_deleted
from memoryd.models.db import session_scope, utcnow
from memoryd.models.keys import SessionKey
from memoryd.models.tables import SHARED_USER, Base, Erasure, Memory
from memoryd.settings import Settings
from testkit.fakellm import FakeLLM, bad_request
from tests.conftest import with_llm
from tests.models.test_tallies import assert_tallies_match

AGENT = "bot"
# Tables whose rows hold nothing of a scope, by design: the operator's keys and
# per-agent settings, the circuit, the audit trail itself and the pipeline's totals
# (figures only; both checked apart).
# Whole-deployment tables: no scope's ids or text, figures only (memory_tallies is
# checked against the memories left instead).
NOT_SCOPED = {
    "api_keys",
    "agent_settings",
    "circuits",
    "erasures",
    "batch_totals",
    "memory_tallies",
}


def totals(settings: Settings) -> dict[str, object]:
    figures = pipeline_stats(settings)
    return {k: figures[k] for k in ("batches", "llm_calls", "tokens_in", "facts_accepted")}


def mark() -> str:
    """A word no other row of the test holds."""
    return f"zq{uuid.uuid4().hex[:12]}"


def rows(settings: Settings) -> dict[str, set[str]]:
    """Every row of every table, each as one string (JSON of its values)."""
    found: dict[str, set[str]] = {}
    with session_scope(settings.storage, readonly=True) as session:
        for table in Base.metadata.sorted_tables:
            found[table.name] = {
                json.dumps([_plain(v) for v in row], ensure_ascii=False, default=str)
                for row in session.execute(select(table))
            }
    return found


def _plain(value: Any) -> Any:
    return value.hex() if isinstance(value, bytes) else value


def say(client: MemoryClient, user: str, session: str, lines: list[str]) -> SessionKey:
    turns = [
        {"agent_id": AGENT, "user_id": user, "session_id": session, "role": "user", "content": line}
        for line in lines
    ]
    assert not client.enqueue_turns(turns).rejected
    client.end_session(AGENT, user, session)
    return SessionKey(AGENT, user, session)


def populate(client: MemoryClient, user: str, turns: int) -> list[str]:
    """Everything a user leaves behind, through the same calls a backend makes: two
    sessions extracted (one longer than a batch), memories remembered, edited and
    deleted, a profile, recalls of its own and of the agent's shared memories. Returns
    the words only this user wrote."""
    settings = client.settings
    words = [mark() for _ in range(8)]
    chatter = [f"Just chatting about {words[0]} number {i}." for i in range(turns)]
    long_session = [f"I live in {words[1].title()}.", *chatter, f"Call me {words[2]}."]
    for key in (
        say(client, user, "s1", long_session),
        say(client, user, "s2", [f"I prefer {words[3]} tea."]),
    ):
        while extract_session(settings, key).more_pending:
            pass
    kept = client.remember(AGENT, user, f"Plays {words[4]} on Sundays")
    client.update(AGENT, user, kept.id, content=f"Plays {words[4]} and {words[5]} on Sundays")
    gone = client.remember(AGENT, user, f"Owes {words[6]} a call")
    client.forget(AGENT, user, gone.id)
    client.patch_profile(AGENT, user, "user", {"occupation": f"{words[7]} keeper"})
    client.recall(f"{words[4]} Sundays", AGENT, user, session_id="s1")
    client.recall("house rules", AGENT, user, session_id="s2")  # the shared memory
    client.build_context(f"what about {words[3]} tea", AGENT, user, session_id="s2")
    return [user, *words]


def dead_letter(settings: Settings, client: MemoryClient, user: str) -> str:
    """A turn whose batch the model refused until it was dead-lettered."""
    word = mark()
    with FakeLLM() as llm:
        llm.push(*[bad_request() for _ in range(10)])
        failing = with_llm(settings, llm, max_attempts=1)
        key = say(client, user, "s3", [f"My locker code is {word}."])
        extract_session(failing, key)
    return word


@pytest.fixture
def client(settings: Settings) -> Iterator[MemoryClient]:
    client = MemoryClient(settings, dispatch=False)
    client.remember(AGENT, SHARED_USER, "House rules: be kind", shared=True)
    yield client


def holding(found: dict[str, set[str]], words: list[str]) -> dict[str, list[str]]:
    return {
        table: [row for row in table_rows if any(w in row for w in words)]
        for table, table_rows in found.items()
        if any(any(w in row for w in words) for row in table_rows)
    }


@hypothesis_settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(turns=st.integers(0, 45), erased_index=st.integers(0, 2))
def test_erasing_a_scope_leaves_nothing_of_it_and_everything_else(
    settings: Settings, client: MemoryClient, turns: int, erased_index: int
) -> None:
    users = [mark() for _ in range(3)]
    words = {user: populate(client, user, turns) for user in users}
    erased = users[erased_index]
    words[erased].append(dead_letter(settings, client, erased))
    before, pipeline = rows(settings), totals(settings)
    assert holding(before, words[erased])["memories"]  # the scenario reached the tables

    out = client.erase(AGENT, erased, actor="test")

    after = rows(settings)
    assert totals(settings) == pipeline  # the erased batches' figures are still counted
    with session_scope(settings.storage, readonly=True) as session:
        assert_tallies_match(session)  # the whole store's figures lost the erased memories
    assert holding(after, words[erased]) == {}
    for table, table_rows in before.items():
        if table in NOT_SCOPED:
            continue
        expected = {row for row in table_rows if not any(w in row for w in words[erased])}
        if table == "conflict_reviews":  # ids only: none in this scenario
            expected = table_rows
        assert after[table] == expected, table
    assert out.finished_at is not None and out.rows["memories"] >= 4
    assert out.rows["turns"] == turns + 4 and out.rows["memory_usage"] >= 1
    for user in users:
        if user != erased:
            assert client.list(AGENT, user), "another scope lost its memories"


def test_the_audit_row_names_nobody_and_a_second_erase_removes_nothing(
    settings: Settings, client: MemoryClient
) -> None:
    user = mark()
    populate(client, user, 3)
    first = client.erase(AGENT, user, actor="key ops")
    again = client.erase(AGENT, user, actor="key ops")
    assert sum(again.rows.values()) == 0 and again.digest == first.digest
    with session_scope(settings.storage, readonly=True) as session:
        audit = session.scalars(select(Erasure).order_by(Erasure.id)).all()
    assert [(a.actor, a.agent_id, a.user_id, a.finished_at is not None) for a in audit] == [
        ("key ops", None, None, True),
        ("key ops", None, None, True),
    ]
    assert user not in json.dumps([a.rows for a in audit])


def test_an_interrupted_erasure_is_finished_by_the_maintenance_cycle(
    settings: Settings, client: MemoryClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryd.maintenance.cycle import run_cycle
    from memoryd.memories import erasure

    user = mark()
    words = populate(client, user, 3)

    class Killed(Exception):
        pass

    def killed(*_args: Any) -> list[Any]:
        raise Killed  # the process dies after the sessions went

    steps = [("sessions", erasure._sessions), ("memories", killed)]
    monkeypatch.setattr(erasure, "SCOPE_STEPS", steps)
    with pytest.raises(Killed):
        client.erase(AGENT, user, actor="cli")
    monkeypatch.undo()
    assert holding(rows(settings), words)["memories"]  # stopped mid-way

    counts = run_cycle(settings, utcnow() + erasure.STALLED * 2)
    assert counts.erasures_resumed == 1
    assert holding(rows(settings), words) == {}


def test_erasing_a_session_keeps_the_rest_of_the_scope(
    settings: Settings, client: MemoryClient
) -> None:
    user = mark()
    words = populate(client, user, 25)
    client.erase(AGENT, user, "s1", actor="cli")
    left = rows(settings)
    # s1's turns and what was learnt from them (home, name) are gone
    _user, chatter, city, name, tea, plays, *_rest, occupation = words
    for word in (chatter, city):
        assert holding(left, [word]) == {}, word
    # What the session taught the profile stays there (edit the profile to change it).
    assert set(holding(left, [name])) == {"profiles", "profile_events"}
    contents = {m.content for m in client.list(AGENT, user)}
    assert any(tea in c for c in contents)  # learnt in s2
    assert any(plays in c for c in contents)  # remembered directly
    assert occupation in client.profile(AGENT, user, "user").content["occupation"]


def test_deleted_memories_are_purged_after_the_retention(
    settings: Settings, client: MemoryClient
) -> None:
    kept = client.remember(AGENT, "ann", "Deleted yesterday")
    client.forget(AGENT, "ann", kept.id)
    with session_scope(settings.storage) as session:
        assert purge_deleted(session, settings.memories, utcnow(), 100) == 0  # still restorable
        later = utcnow() + timedelta(days=31)
        assert purge_deleted(session, settings.memories, later, 100) == 1
    with session_scope(settings.storage, readonly=True) as session:
        assert session.get(Memory, kept.id) is None
