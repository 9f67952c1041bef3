"""AsyncMemoryClient: MemoryClient's methods awaited, off the event loop."""

from __future__ import annotations

import asyncio
import inspect
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import create_engine, make_url, text

from memoryd import AsyncMemoryClient, MemoryClient, NotFound, TurnRejected
from memoryd.extraction.batch import extract_session
from memoryd.models.keys import SessionKey
from memoryd.settings import Settings

KEY = SessionKey("bot", "u1", "s1")
IDS = {"agent_id": "bot", "user_id": "u1", "session_id": "s1"}


def test_every_client_method_has_an_awaitable_twin() -> None:
    """A method added to MemoryClient and forgotten here fails this test."""
    public = {
        name
        for name, member in inspect.getmembers(MemoryClient, inspect.isfunction)
        if not name.startswith("_") and name != "close"  # aclose flushes, then frees threads
    }
    client = AsyncMemoryClient(Settings(), dispatch=False)
    missing = {name for name in public if not inspect.iscoroutinefunction(getattr(client, name))}
    assert not missing
    assert client.recall.__doc__ == MemoryClient.recall.__doc__
    # What help() and signature-reading tool builders see: the bound method's parameters.
    assert str(inspect.signature(client.recall)) == str(inspect.signature(MemoryClient().recall))


def test_a_closed_client_says_so_and_closing_twice_is_harmless(settings: Settings) -> None:
    async def scenario() -> None:
        async with AsyncMemoryClient(settings, dispatch=False) as memory:
            await memory.remember("bot", "u1", "Prefers green tea")
            await memory.aclose()  # then again on leaving the block
        with pytest.raises(RuntimeError, match="closed"):
            await memory.recall("tea", "bot", "u1")

    asyncio.run(scenario())


def test_the_async_client_gives_what_the_sync_client_gives(settings: Settings) -> None:
    sync = MemoryClient(settings, dispatch=False)

    async def scenario() -> None:
        async with AsyncMemoryClient(settings, dispatch=False) as memory:
            said = await memory.enqueue_turns(
                [
                    {**IDS, "role": "user", "content": "Call me Sam, I live in Lisbon."},
                    {**IDS, "role": "assistant", "content": "Noted, Sam."},
                ]
            )
            assert said.accepted == 2
            assert await memory.end_session("bot", "u1", "s1")
            extract_session(settings, KEY)
            hits = await memory.recall("where does Sam live", "bot", "u1")
            assert [h.content for h in hits] == [
                h.content for h in sync.recall("where does Sam live", "bot", "u1")
            ]
            assert "Lisbon" in await memory.build_context("where does Sam live", "bot", "u1")
            saved = await memory.remember("bot", "u1", "Prefers green tea")
            assert (await memory.get("bot", "u1", saved.id)).content == "Prefers green tea"
            with pytest.raises(NotFound):
                await memory.get("bot", "u1", saved.id + 1000)
            with pytest.raises(TurnRejected, match="role"):
                await memory.enqueue_turn(**IDS, role="robot", content="hi")

    asyncio.run(scenario())


@contextmanager
def writes_held(settings: Settings, memory_id: int) -> Iterator[object]:
    """Another connection holds what a change of `memory_id` needs: SQLite's write lock,
    or PostgreSQL's lock on the memory's row. Commits when the block ends."""
    url = make_url(settings.storage.resolved_database_url)
    if url.get_backend_name() == "sqlite":
        holder = sqlite3.connect(str(url.database), isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            yield holder
        finally:
            holder.execute("COMMIT")
            holder.close()
        return
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text("SELECT id FROM memories WHERE id = :id FOR UPDATE"), {"id": memory_id}
            )
            yield conn
    finally:
        engine.dispose()


def test_a_call_waiting_on_the_database_leaves_the_event_loop_free(settings: Settings) -> None:
    """While `forget` waits for a lock another connection holds, other coroutines run:
    here the one that releases the lock. Were the call made on the loop's thread, that
    coroutine could not run and the call would fail when its lock wait ran out."""
    saved = MemoryClient(settings, dispatch=False).remember("bot", "u1", "Prefers green tea")

    async def scenario() -> None:
        async with AsyncMemoryClient(settings, dispatch=False) as memory:
            with writes_held(settings, saved.id):
                forgetting = asyncio.create_task(memory.forget("bot", "u1", saved.id))
                await asyncio.sleep(0.5)
                assert not forgetting.done()  # it is waiting for the lock, not finished
            forgotten = await forgetting
            assert forgotten.status == "deleted"

    asyncio.run(scenario())


def test_more_calls_than_threads_all_complete(settings: Settings) -> None:
    """Two hundred saves at once through three threads: each waits for a thread, none
    is lost, and the event loop is never what they wait on."""

    async def scenario() -> None:
        async with AsyncMemoryClient(settings, dispatch=False, threads=3) as memory:
            words = [f"{chr(97 + i // 26 % 26)}{chr(97 + i % 26)}lorbex" for i in range(200)]
            saves = [memory.remember("bot", "u1", f"Learnt the word {w}") for w in words]
            saved = await asyncio.gather(*saves)
            assert len({m.id for m in saved}) == 200
            assert (await memory.health("bot", "u1")).active == 200

    asyncio.run(scenario())
