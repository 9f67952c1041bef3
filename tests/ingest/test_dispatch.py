"""Extract triggers reach the broker, even from a process that exits right away."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from kombu import Connection, Queue  # type: ignore[attr-defined]

from memoryd.ingest.dispatch import dispatch_extract
from memoryd.models.keys import SessionKey
from memoryd.worker import make_celery
from testkit.workers import REPO_ROOT, settings_env
from tests.conftest import make_settings
from tests.factories import turn_item

SCRIPT = """
from memoryd import MemoryClient
client = MemoryClient()
client.enqueue_turns([{turn}])
client.end_session("bot", "ann", "s1")
"""


def queued_headers(broker_url: str) -> list[dict[str, Any]]:
    """The headers of the messages in the extraction queue (taken off it)."""
    if broker_url.startswith("redis"):
        queued = redis.Redis.from_url(broker_url).lrange("extraction", 0, -1)
        return [json.loads(m)["headers"] for m in queued]
    with Connection(broker_url) as conn:
        queue = Queue("extraction", no_declare=True)(conn.default_channel)
        headers = []
        while (message := queue.get(no_ack=True)) is not None:
            headers.append(message.headers)
        return headers


# PostgreSQL with Redis, and with RabbitMQ (whose publishes wait for the broker's confirm).
BROKERS = ["postgres", "rabbitmq"]


@pytest.mark.parametrize("backend", BROKERS)
def test_a_script_that_ends_right_after_its_last_call_still_sends_its_trigger(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """No flush() call: the trigger goes out from the background publisher before the
    interpreter finishes shutting down."""
    settings = make_settings(backend, tmp_path, request)
    script = SCRIPT.format(turn=json.dumps(turn_item(1)))
    out = subprocess.run(
        [sys.executable, "-c", script],
        env=settings_env(settings),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "could not publish" not in out.stderr
    tasks = queued_headers(settings.storage.broker_url)
    assert [(t["task"], t["argsrepr"]) for t in tasks] == [
        ("memoryd.extract_session", "['bot', 'ann', 's1']")
    ]


@pytest.mark.parametrize("backend", BROKERS)
def test_each_trigger_is_a_task_flower_sees_as_sent(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Flower builds its task list from events: a trigger published without a
    task-sent event would appear only once a worker starts it."""
    settings = make_settings(backend, tmp_path, request)
    app = make_celery(settings)
    events: list[dict[str, Any]] = []
    with app.connection_for_read() as connection:
        receiver = app.events.Receiver(connection, handlers={"*": events.append})
        listening = threading.Thread(target=receiver.capture, daemon=True)
        listening.start()
        deadline = time.monotonic() + 15
        while not events and time.monotonic() < deadline:  # until the receiver is bound
            dispatch_extract(app, [SessionKey("bot", "ann", "s1")])
            listening.join(0.3)
        receiver.should_stop = True
    seen = [event for event in events if event["type"] == "task-sent"]
    assert seen and seen[0]["name"] == "memoryd.extract_session"
    assert seen[0]["args"] == "['bot', 'ann', 's1']" and seen[0]["queue"] == "extraction"
