"""The pipeline with real worker processes and beat, every process reaching PostgreSQL
through a transaction-pooling PgBouncer with three server connections
(MEMORYD_DB_TRANSACTION_POOLER): all turns extracted once, also when a worker is killed
mid-batch."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from sqlalchemy import func, select

from memoryd.client import MemoryClient
from memoryd.models.db import session_scope
from memoryd.models.tables import Turn
from memoryd.settings import Settings
from testkit import fakellm
from testkit.fakellm import FakeLLM
from testkit.services import PgBouncer
from testkit.workers import start_beat, start_worker, turns_left, wait_until
from tests.conftest import make_settings, through, with_llm
from tests.worker.test_pipeline_e2e import (
    EXPECTED,
    USERS,
    active_contents,
    enqueue_all,
    memory_rows,
)

pytestmark = pytest.mark.slow

TURNS = 2 * sum(2 * len(lines) for lines in USERS.values())


@pytest.fixture
def pooled(
    pooler: PgBouncer, tmp_path: Path, request: pytest.FixtureRequest, fake_llm: FakeLLM
) -> Settings:
    base = make_settings(
        "postgres",
        tmp_path,
        request,
        lease_seconds=3,
        flush_idle_seconds=1,
        sweep_interval_seconds=1,
    )
    return with_llm(through(pooler, base, db_transaction_pooler=True), fake_llm)


def statuses(settings: Settings) -> dict[str, int]:
    with session_scope(settings.storage) as session:
        counted = select(Turn.status, func.count()).group_by(Turn.status)
        return {str(status): n for status, n in session.execute(counted).all()}


def test_the_pipeline_through_a_transaction_pooler(pooled: Settings, tmp_path: Path) -> None:
    workers = [start_worker(pooled, tmp_path, name=f"w{i}") for i in range(2)]
    beat = start_beat(pooled, tmp_path)
    try:
        assert enqueue_all(MemoryClient(pooled)) == TURNS
        wait_until(
            lambda: turns_left(pooled) == 0, 90, what="all turns done", procs=(*workers, beat)
        )
    finally:
        for proc in (*workers, beat):
            proc.stop()
    assert statuses(pooled) == {"done": TURNS}
    assert active_contents(pooled) == EXPECTED
    assert {seen for _user, _content, seen in memory_rows(pooled)} == {2}


def test_a_worker_killed_mid_batch_behind_the_pooler_loses_nothing(
    pooled: Settings, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.push(fakellm.slow(30))  # the first extraction hangs in the LLM
    doomed = start_worker(pooled, tmp_path, name="doomed")
    enqueue_all(MemoryClient(pooled))
    wait_until(lambda: fake_llm.calls >= 1, 30, what="first LLM call", procs=(doomed,))
    doomed.kill(signal.SIGKILL)
    beat = start_beat(pooled, tmp_path)
    survivor = start_worker(pooled, tmp_path, name="survivor")
    try:
        wait_until(
            lambda: turns_left(pooled) == 0, 90, what="all turns done", procs=(survivor, beat)
        )
    finally:
        survivor.stop()
        beat.stop()
    assert statuses(pooled) == {"done": TURNS}
    assert active_contents(pooled) == EXPECTED
    assert {seen for _user, _content, seen in memory_rows(pooled)} == {2}
