"""A worker on a Redis broker leaves nothing behind when it goes: Redis deletes no
queue once its consumer is gone, so a queue bound per worker (Celery's gossip) would
stay, filled with every other worker's events, one more at each restart (real Redis,
a real `memoryd worker` started without --without-gossip, and killed)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
import redis

from testkit.workers import Proc, start_worker, wait_until
from tests.conftest import make_settings


def test_a_worker_on_redis_leaves_no_event_queue_behind(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    settings = make_settings("postgres", tmp_path, request)
    broker = redis.Redis.from_url(settings.storage.broker_url)
    for _ in range(2):  # a restart, after a worker killed (the OOM killer, a lost node)
        worker = start_worker(settings, tmp_path, without=("mingle",))
        try:
            ready = partial(_ready, worker)
            wait_until(ready, what="the worker ready", procs=(worker,))
        finally:
            worker.kill()
    assert broker.keys("celeryev*") == []
    assert broker.smembers("_kombu.binding.celeryev") == set()


def _ready(worker: Proc) -> bool:
    return " ready." in worker.log()
