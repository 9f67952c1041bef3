"""Erasing a scope while a real worker process extracts it."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select

from memoryd.client import MemoryClient
from memoryd.models.db import session_scope
from memoryd.models.tables import BatchStatus, ExtractionBatch, Turn, TurnStatus
from memoryd.settings import Settings
from testkit.fakellm import FakeLLM
from testkit.workers import pipeline_state, start_worker, turns_left, wait_until
from tests.conftest import make_settings, with_llm
from tests.factories import make_memory
from tests.memories.test_erasure import holding, mark, rows

pytestmark = pytest.mark.slow

AGENT = "bot"
STORED = 1000


def conversation(user: str, session: str, word: str, n: int) -> list[dict[str, str]]:
    lines = [
        f"I live in {word.title()}{i}." if i % 5 == 0 else f"About {word} {i}" for i in range(n)
    ]
    return [
        {"agent_id": AGENT, "user_id": user, "session_id": session, "role": "user", "content": line}
        for line in lines
    ]


def test_an_erased_scope_stays_erased_while_a_worker_extracts_it(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with FakeLLM(delay=0.4) as llm:  # batches stay in flight long enough to meet the erase
        settings: Settings = with_llm(
            make_settings(backend, tmp_path, request, lease_seconds=5, flush_idle_seconds=1),
            llm,
        )
        client = MemoryClient(settings)
        erased, kept = mark(), mark()
        word, other = mark(), mark()
        with session_scope(
            settings.storage
        ) as session:  # a scope of some size: erasing takes a while
            for i in range(STORED):
                make_memory(session, settings, f"Note {i} about {word}", user_id=erased)
        # The worker first: a message sent before any worker bound its queue may be lost
        # on Redis (the sweep would find the turns, later than this test waits).
        worker = start_worker(settings, tmp_path, concurrency=4)
        try:
            wait_until(lambda: "ready." in worker.log(), 60, what="the worker", procs=(worker,))
            for s in range(4):  # each session longer than a batch (20 turns)
                client.enqueue_turns(conversation(erased, f"s{s}", word, 45))
                client.enqueue_turns(conversation(kept, f"s{s}", other, 45))
                client.end_session(AGENT, erased, f"s{s}")
                client.end_session(AGENT, kept, f"s{s}")
            client.flush()
            wait_until(
                lambda: _running(settings, erased), 60, what="a batch of the scope", procs=(worker,)
            )
            out = client.erase(AGENT, erased, actor="test")
            wait_until(
                lambda: turns_left(settings) == 0,
                120,
                what="the rest done",
                procs=(worker,),
                state=lambda: pipeline_state(settings),
            )
        finally:
            worker.stop()
        left = rows(settings)
        assert holding(left, [erased, word]) == {}
        assert out.rows["turns"] > 0 and "Traceback" not in worker.log()
        # A batch of the scope was in flight: its write found no lease and was refused.
        assert "lease lost" in worker.log()
        assert client.list(AGENT, kept)  # the other scope: extracted, every turn done
        assert _done(settings, kept) == 4 * 45


def _running(settings: Settings, user: str) -> bool:
    with session_scope(settings.storage, readonly=True) as session:
        return (
            session.scalar(
                select(ExtractionBatch.id).where(
                    ExtractionBatch.user_id == user,
                    ExtractionBatch.status == BatchStatus.RUNNING,
                )
            )
            is not None
        )


def _done(settings: Settings, user: str) -> int:
    with session_scope(settings.storage, readonly=True) as session:
        done = select(func.count()).where(Turn.user_id == user, Turn.status == TurnStatus.DONE)
        return int(session.scalar(done) or 0)
