"""`memoryd enqueue --end` on the Redis broker, which this suite pairs with PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from tests.cli.test_cli import memoryd
from tests.conftest import make_settings

pytestmark = pytest.mark.slow  # runs `memoryd` as a process of its own


def test_enqueue_end_sends_its_trigger_before_exiting(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A short-lived process (this command, or any script) must not exit before its
    extract trigger reached the broker: Redis, which this suite pairs with PostgreSQL."""
    settings = make_settings("postgres", tmp_path, request)
    out = memoryd(
        settings,
        "enqueue",
        "--agent",
        "bot",
        "--user",
        "ann",
        "--session",
        "s1",
        "--content",
        "Call me Sam.",
        "--end",
    )
    assert out.returncode == 0, out.stderr
    queued = redis.Redis.from_url(settings.storage.broker_url).lrange("extraction", 0, -1)
    bodies = [json.loads(m)["headers"] for m in queued]
    assert [(h["task"], h["argsrepr"]) for h in bodies] == [
        ("memoryd.extract_session", "['bot', 'ann', 's1']")
    ]
