"""Bounded time: a turn stamped ahead of the database clock is refused per item, on every
way in, so a sender with a bad clock cannot freeze a fact as "said last"."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.errors import TurnRejected
from memoryd.extraction.batch import extract_session
from memoryd.ingest.chunks import CHUNK_TURNS
from memoryd.models.coordination import database_now
from memoryd.models.keys import SessionKey
from memoryd.settings import Settings, StorageSettings
from testkit.workers import settings_env
from tests.factories import count_turns, turn_item

IN_2099 = "2099-01-01T09:00:00Z"


def test_a_turn_from_a_clock_in_2099_is_refused_and_bob_replaces_sam(
    settings: Settings, db: Session
) -> None:
    client = MemoryClient(settings, dispatch=False)
    with pytest.raises(TurnRejected, match=r"timestamp: .*ahead of the database clock"):
        client.enqueue_turn(turn_item(content="Call me Sam.", timestamp=IN_2099))
    client.enqueue_turn(turn_item(content="Call me Sam."))
    client.end_session("bot", "ann", "s1")
    extract_session(settings, SessionKey("bot", "ann", "s1"))
    client.enqueue_turn(turn_item(content="Call me Bob.", session_id="s2"))
    client.end_session("bot", "ann", "s2")
    extract_session(settings, SessionKey("bot", "ann", "s2"))
    assert [m.content for m in client.list("bot", "ann")] == ["Wants to be called Bob"]


def test_the_skew_is_measured_by_the_database_clock_and_is_a_setting(
    settings: Settings, db: Session
) -> None:
    now = database_now(settings.storage)
    soon = (now + timedelta(seconds=200)).isoformat()
    later = (now + timedelta(seconds=400)).isoformat()
    client = MemoryClient(settings, dispatch=False)
    result = client.enqueue_turns([turn_item(0, timestamp=soon), turn_item(1, timestamp=later)])
    assert result.accepted == 1
    (refused,) = result.rejected
    assert refused["index"] == 1 and refused["errors"][0]["field"] == "timestamp"
    assert "MEMORYD_MAX_CLOCK_SKEW_SECONDS" in refused["errors"][0]["message"]

    strict = settings.updated(**{"max_clock_skew_seconds": 60})
    result = MemoryClient(strict, dispatch=False).enqueue_turns([turn_item(2, timestamp=soon)])
    assert (result.accepted, [r["index"] for r in result.rejected]) == (0, [0])
    assert count_turns(db) == 1


def test_a_large_call_reads_the_clock_once_and_refuses_only_the_turns_ahead(
    settings: Settings, db: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A history import of more than CHUNK_TURNS stamped turns is validated chunk by
    chunk inside its write transaction: the database clock is read once, before it."""
    from memoryd.ingest import buffer

    events: list[str] = []
    write_connection = buffer.write_connection

    def clock(storage: StorageSettings) -> datetime:
        events.append("clock")
        return database_now(storage)

    @contextmanager
    def writing(storage: StorageSettings) -> Iterator[Any]:
        events.append("write")
        with write_connection(storage) as conn:
            yield conn

    monkeypatch.setattr(buffer, "database_now", clock)
    monkeypatch.setattr(buffer, "write_connection", writing)
    size = 2 * CHUNK_TURNS + 1
    past = (database_now(settings.storage) - timedelta(days=3)).isoformat()
    items = [turn_item(i, timestamp=past) for i in range(size)]
    items[-1] = turn_item(size - 1, timestamp=IN_2099)  # in the last chunk
    result = MemoryClient(settings, dispatch=False).enqueue_turns(items)
    assert (result.accepted, [r["index"] for r in result.rejected]) == (size - 1, [size - 1])
    assert result.rejected[0]["errors"][0]["field"] == "timestamp"
    assert events == ["clock", "write"]  # no connection held while the clock is read
    assert count_turns(db) == size - 1


def test_the_celery_task_refuses_a_future_turn_and_keeps_the_rest(
    settings: Settings, db: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryd.tasks import ingest as task_module

    monkeypatch.setattr(task_module, "get_settings", lambda: settings)
    payload = {"turns": [turn_item(0), turn_item(1, timestamp=IN_2099)]}
    result = task_module.ingest_turns.apply(args=[payload]).get()
    assert result["accepted"] == 1
    assert result["rejected"][0]["index"] == 1
    assert result["rejected"][0]["errors"][0]["field"] == "timestamp"
    assert count_turns(db) == 1


def test_the_cli_refuses_a_future_turn_from_a_payload_file(
    settings: Settings, db: Session, tmp_path: Path
) -> None:
    payload = tmp_path / "turns.json"
    payload.write_text(json.dumps({"turns": [turn_item(timestamp=IN_2099)]}))
    out = subprocess.run(
        [sys.executable, "-m", "memoryd", "enqueue", "--file", str(payload), "--no-dispatch"],
        env=settings_env(settings),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1, out.stderr
    assert "ahead of the database clock" in out.stdout
    assert count_turns(db) == 0
