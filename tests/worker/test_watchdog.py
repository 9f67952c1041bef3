"""A worker whose consumer stops taking messages exits (to be replaced); a healthy one,
idle or busy (every slot on a call longer than the watchdog), never does. Real worker
processes on Redis and the filesystem broker."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from celery.utils.nodenames import worker_direct

from memoryd.client import MemoryClient
from memoryd.models.db import session_scope
from memoryd.settings import Settings
from memoryd.worker import make_celery
from memoryd.worker.watchdog import EXIT_WEDGED, PING_TASK
from testkit.fakellm import FakeLLM
from testkit.workers import Proc, start_worker, wait_until
from tests.conftest import make_settings
from tests.factories import count_turns

pytestmark = pytest.mark.slow


def test_a_worker_whose_consumer_wedges_exits_and_a_healthy_one_stays(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    settings = make_settings(backend, tmp_path, request, consumer_watchdog_seconds=1.5)
    healthy = start_worker(settings, tmp_path, name="healthy", concurrency=2)
    wedged = start_worker(settings, tmp_path, name="wedged", concurrency=2)
    try:
        app = make_celery(settings)
        wait_until(
            lambda: len(app.control.ping(timeout=0.5) or []) == 2,
            60,
            what="both workers up",
            procs=(healthy, wedged),
        )
        # Several idle rounds: each worker's own pings arrive and it carries on.
        for worker in (healthy, wedged):
            wait_until(
                lambda w=worker: _pings_received(w) >= 3, 60, what="three pings", procs=(worker,)
            )
        assert healthy.alive() and wedged.alive()
        # Stop one worker's consumer from taking anything, its own queue included: what a
        # broker client wedged after a reconnection looks like from the outside.
        (name,) = [n for n in app.control.ping(timeout=1) if next(iter(n)).startswith("wedged")]
        hostname = next(iter(name))
        for queue in ("extraction", "maintenance", worker_direct(hostname).name):
            app.control.cancel_consumer(queue, destination=[hostname], reply=True)
        wait_until(lambda: not wedged.alive(), 30, what="the wedged worker exits", procs=(wedged,))
        assert wedged.process.returncode == EXIT_WEDGED
        assert "exiting so that a fresh worker replaces it" in wedged.log()
        assert healthy.alive()
    finally:
        healthy.stop()
        wedged.stop()


def test_a_worker_whose_every_slot_is_busy_longer_than_the_watchdog_stays(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """acks_late and a prefetch of one per slot keep a busy worker from taking its own
    ping: the watchdog must not take that for a wedge (it once exited after 3.4 s)."""
    with FakeLLM(delay=8.0) as llm:
        settings = make_settings(
            backend,
            tmp_path,
            request,
            consumer_watchdog_seconds=1.5,
            llm_base_url=llm.base_url,
            llm_api_key="test-key",
            llm_timeout_seconds=30.0,
        )
        worker = start_worker(settings, tmp_path, name="busy", concurrency=1)
        try:
            client = MemoryClient(settings)
            client.enqueue_turn(
                agent_id="bot", user_id="ann", session_id="s1", role="user", content="Call me Sam."
            )
            client.end_session("bot", "ann", "s1")
            client.flush()
            wait_until(lambda: llm.calls == 1, 60, what="the call starts", procs=(worker,))
            wait_until(
                lambda: _turns_done(settings) == 1, 60, what="the call ends", procs=(worker,)
            )
            assert worker.alive(), worker.log()[-2000:]
            assert "exiting so that a fresh worker replaces it" not in worker.log()
        finally:
            worker.stop()


def _turns_done(settings: Settings) -> int:
    with session_scope(settings.storage, readonly=True) as session:
        return count_turns(session, "done")


def _pings_received(worker: Proc) -> int:
    return len(re.findall(rf"{re.escape(PING_TASK)}\[[^\]]+\] succeeded", worker.log()))
