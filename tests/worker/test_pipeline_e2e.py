"""End to end with real Celery worker processes, a real broker and the fake LLM server.

Each test runs on PostgreSQL + Redis, SQLite + the filesystem broker, and PostgreSQL +
RabbitMQ (quorum queues, publisher confirms; tests/conftest.py says where the broker
comes from)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import redis
from sqlalchemy import func, select

from memoryd.client import MemoryClient
from memoryd.ingest.dispatch import dispatch_extract
from memoryd.models.db import session_scope
from memoryd.models.keys import SessionKey
from memoryd.models.tables import ExtractionBatch, Memory, MemoryStatus, Turn, TurnStatus
from memoryd.settings import Settings
from memoryd.worker import make_celery
from testkit import fakellm
from testkit.fakellm import FakeLLM
from testkit.services import purge_queues
from testkit.workers import start_beat, start_worker, turns_left, wait_until
from tests.conftest import BACKENDS, make_settings, with_llm

pytestmark = pytest.mark.slow


@pytest.fixture(params=[*BACKENDS, "rabbitmq"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


AGENT = "bot"
USERS = {
    "ann": ["Call me Annie.", "I live in Berlin.", "Please remember that I am vegetarian."],
    "ben": ["我喜欢喝龙井茶。", "叫我小本", "My favourite editor is vim."],
    "cid": ["I prefer dark mode.", "Here is the spec: https://example.com/spec"],
}
EXPECTED = {
    "ann": {"Wants to be called Annie", "Lives in Berlin", "Diet is vegetarian"},
    "ben": {"喜欢喝龙井茶", "希望被称为小本", "Favourite editor is vim"},
    "cid": {"Prefers dark mode", "Shared link: https://example.com/spec"},
}


def conversation(user: str, session: str, lines: list[str]) -> list[dict[str, str]]:
    turns = []
    for i, line in enumerate(lines):
        turns.append(
            {
                "agent_id": AGENT,
                "user_id": user,
                "session_id": session,
                "role": "user",
                "content": line,
                "turn_key": f"{session}-u{i}",
            }
        )
        turns.append(
            {
                "agent_id": AGENT,
                "user_id": user,
                "session_id": session,
                "role": "assistant",
                "content": "Noted.",
                "turn_key": f"{session}-a{i}",
            }
        )
    return turns


def enqueue_all(client: MemoryClient, end: bool = True) -> int:
    count = 0
    for user, lines in USERS.items():
        for s in range(2):  # two sessions per user, the same statements in both
            session = f"{user}-s{s}"
            count += client.enqueue_turns(conversation(user, session, lines)).accepted
            if end:
                client.end_session(AGENT, user, session)
    return count


def active_contents(settings: Settings) -> dict[str, set[str]]:
    with session_scope(settings.storage) as session:
        rows = session.execute(
            select(Memory.user_id, Memory.content).where(Memory.status == MemoryStatus.ACTIVE)
        ).all()
    out: dict[str, set[str]] = {}
    for user, content in rows:
        out.setdefault(user, set()).add(content)
    return out


def memory_rows(settings: Settings) -> list[tuple[str, str, int]]:
    with session_scope(settings.storage) as session:
        return sorted(
            (m.user_id, m.content, m.evidence_count) for m in session.scalars(select(Memory)).all()
        )


@pytest.fixture
def llm_settings(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, fake_llm: FakeLLM
) -> Settings:
    base = make_settings(
        backend, tmp_path, request, lease_seconds=3, flush_idle_seconds=1, sweep_interval_seconds=1
    )
    return with_llm(base, fake_llm)


def test_users_and_sessions_end_to_end(llm_settings: Settings, tmp_path: Path) -> None:
    worker = start_worker(llm_settings, tmp_path)
    try:
        enqueued = enqueue_all(MemoryClient(llm_settings))
        wait_until(
            lambda: turns_left(llm_settings) == 0, 90, what="all turns done", procs=(worker,)
        )
    finally:
        worker.stop()
    with session_scope(llm_settings.storage) as session:
        done = session.scalar(select(func.count()).where(Turn.status == TurnStatus.DONE))
    assert done == enqueued == 2 * sum(2 * len(v) for v in USERS.values())
    assert active_contents(llm_settings) == EXPECTED  # per-scope: nothing crossed users
    # Each fact was said in two sessions: one memory, seen twice.
    assert {ev for _u, _c, ev in memory_rows(llm_settings)} == {2}


def test_worker_killed_mid_llm_call_loses_nothing(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, fake_llm: FakeLLM
) -> None:
    settings = with_llm(
        make_settings(
            backend,
            tmp_path,
            request,
            lease_seconds=3,
            flush_idle_seconds=1,
            sweep_interval_seconds=1,
        ),
        fake_llm,
    )
    fake_llm.push(fakellm.slow(30))  # the first extraction hangs in the LLM
    worker = start_worker(settings, tmp_path, name="doomed")
    client = MemoryClient(settings)
    enqueue_all(client)
    wait_until(lambda: fake_llm.calls >= 1, 30, what="first LLM call", procs=(worker,))
    worker.kill(signal.SIGKILL)
    beat = start_beat(settings, tmp_path)
    worker2 = start_worker(settings, tmp_path, name="survivor")
    try:
        wait_until(
            lambda: turns_left(settings) == 0,
            90,
            what="all turns done after kill",
            procs=(worker2, beat),
        )
    finally:
        worker2.stop()
        beat.stop()
    with session_scope(settings.storage) as session:
        statuses = dict(
            session.execute(select(Turn.status, func.count()).group_by(Turn.status)).all()
        )
    assert statuses == {TurnStatus.DONE: 2 * sum(2 * len(v) for v in USERS.values())}
    assert active_contents(settings) == EXPECTED
    assert {ev for _u, _c, ev in memory_rows(settings)} == {2}


def test_dropped_broker_messages_are_recovered_by_the_sweep(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, fake_llm: FakeLLM
) -> None:
    settings = with_llm(
        make_settings(backend, tmp_path, request, flush_idle_seconds=1, sweep_interval_seconds=1),
        fake_llm,
    )
    client = MemoryClient(settings)
    enqueue_all(client)
    client.flush()
    # Every message the client sent is lost before any worker runs.
    if backend == "postgres":
        redis.Redis.from_url(settings.storage.broker_url).flushdb()
    elif backend == "rabbitmq":
        purge_queues(settings.storage.broker_url)
    else:
        for f in (settings.storage.broker_folder / "queue").glob("*"):
            f.unlink()
    assert turns_left(settings) > 0
    worker = start_worker(settings, tmp_path)
    beat = start_beat(settings, tmp_path)
    try:
        wait_until(
            lambda: turns_left(settings) == 0, 90, what="sweep recovery", procs=(worker, beat)
        )
    finally:
        worker.stop()
        beat.stop()
    assert active_contents(settings) == EXPECTED


def test_duplicate_delivery_creates_no_duplicate(llm_settings: Settings, tmp_path: Path) -> None:
    client = MemoryClient(llm_settings, dispatch=False)
    enqueue_all(client)
    app = make_celery(llm_settings)
    keys = [SessionKey(AGENT, u, f"{u}-s{s}") for u in USERS for s in range(2)]
    for _ in range(3):  # every extract message delivered three times
        dispatch_extract(app, keys)
    worker = start_worker(llm_settings, tmp_path, concurrency=8)
    try:
        wait_until(lambda: turns_left(llm_settings) == 0, 90, procs=(worker,))
        time.sleep(1)  # let the redundant deliveries run out
    finally:
        worker.stop()
    rows = memory_rows(llm_settings)
    assert len(rows) == len({(u, c) for u, c, _ in rows}) == sum(map(len, EXPECTED.values()))
    assert {ev for _u, _c, ev in rows} == {2}


def test_ingest_task_by_name_from_any_celery_client(llm_settings: Settings, tmp_path: Path) -> None:
    """What celery-node or gocelery send: the task name and one JSON payload."""
    app = make_celery(llm_settings)
    good = conversation("ann", "ann-raw", USERS["ann"])
    app.send_task(
        "memoryd.ingest_turns", args=[{"turns": [*good, {"role": "user"}]}], queue="extraction"
    )
    worker = start_worker(llm_settings, tmp_path)
    beat = start_beat(llm_settings, tmp_path)  # the session idles out; the sweep flushes it
    try:
        wait_until(
            lambda: len(active_contents(llm_settings).get("ann", ())) == len(EXPECTED["ann"]),
            60,
            what="ingested turns extracted",
            procs=(worker, beat),
        )
    finally:
        worker.stop()
        beat.stop()
    assert active_contents(llm_settings) == {"ann": EXPECTED["ann"]}


def test_two_workers_same_fact_at_once_leave_one_memory(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # Each call held 3 s, so both are in flight together even when a loaded machine
    # hands the second worker its message a second or two late.
    with FakeLLM(delay=3.0) as slow_llm:
        settings = with_llm(make_settings(backend, tmp_path, request), slow_llm)
        settings = settings.updated(**{"llm_timeout_seconds": 10.0})
        client = MemoryClient(settings)
        w1 = start_worker(settings, tmp_path, name="w1", concurrency=1)
        w2 = start_worker(settings, tmp_path, name="w2", concurrency=1)
        try:
            time.sleep(2)  # both workers consuming before the messages arrive
            for session in ("phone", "laptop"):
                client.enqueue_turns(conversation("ann", session, ["I live in Berlin."]))
            for session in ("phone", "laptop"):
                client.end_session(AGENT, "ann", session)
            wait_until(lambda: turns_left(settings) == 0, 60, procs=(w1, w2))
        finally:
            w1.stop()
            w2.stop()
    with session_scope(settings.storage) as session:
        batches = session.scalars(select(ExtractionBatch)).all()
    assert len(batches) == 2
    first, second = sorted(batches, key=lambda b: b.started_at)
    assert first.finished_at is not None and second.started_at < first.finished_at  # overlap
    assert memory_rows(settings) == [("ann", "Lives in Berlin", 2)]
