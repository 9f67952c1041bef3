"""An erasure on SQLite lets other scopes' writers in between its chunks.

SQLite has one writer, and one waiting for the lock polls for it (its busy handler),
sleeping longer the longer it has waited: chunks committed back to back would keep it
out for the whole erasure. Each chunk here holds the lock for HOLD, as a chunk of
memories with long texts does, so the writer reaches its long sleeps. Its longest write
while the erasure runs is held against the erasure's own length, so a slow machine
slows both and the bound stays fair: yielding, the writer waits about one chunk of
CHUNKS; starved, it waits for most of them.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memoryd.client import MemoryClient
from memoryd.memories import erasure
from memoryd.memories.proposals import Fact
from memoryd.memories.store import create_memory
from memoryd.models.db import session_scope, utcnow
from memoryd.models.keys import Scope
from memoryd.models.tables import Actor
from tests.conftest import make_settings

AGENT = "bot"
CHUNKS = 12
HOLD = 0.1  # seconds each chunk holds the write lock


def store(client: MemoryClient, user: str, n: int) -> None:
    with session_scope(client.settings.storage) as session:
        for i in range(n):
            fact = Fact(content=f"Fact {i} about the garden and its roses", confidence=0.9)
            scope = Scope(AGENT, user)
            create_memory(session, client.settings, scope, fact, utcnow(), actor=Actor.API)


def test_another_scopes_writer_is_not_starved_by_an_erasure_on_sqlite(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = MemoryClient(make_settings("sqlite", tmp_path, request), dispatch=False)
    store(client, "heavy", CHUNKS * 10)
    chunk = erasure._chunk

    def slow_chunk(*args: Any) -> int | None:
        count = chunk(*args)
        if count:
            time.sleep(HOLD)  # still in the chunk's transaction: the lock held
        return count

    monkeypatch.setattr(erasure, "CHUNK", 10)
    monkeypatch.setattr(erasure, "_chunk", slow_chunk)
    erasing, stop = threading.Event(), threading.Event()
    waits: list[float] = []  # the writer's writes begun while the erasure ran

    def writer() -> None:
        turn = {"agent_id": AGENT, "user_id": "other", "session_id": "s1", "role": "user"}
        for n in range(10**6):
            if stop.is_set():
                return
            during = erasing.is_set()
            started = time.perf_counter()
            client.enqueue_turns([{**turn, "content": f"line {n}"}])
            if during:
                waits.append(time.perf_counter() - started)
            time.sleep(0.01)  # a worker's own work between its writes

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        time.sleep(0.1)
        erasing.set()
        started = time.perf_counter()
        out = client.erase(AGENT, "heavy", actor="test")
        took = time.perf_counter() - started
    finally:
        stop.set()
        thread.join()
    assert out.rows["memories"] == CHUNKS * 10
    assert waits, "the writer wrote nothing while the erasure ran"
    assert max(waits) < took / 4, (max(waits), took, len(waits))
