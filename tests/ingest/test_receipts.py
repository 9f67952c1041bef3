"""Write receipts: a turn's status by its turn_key, the memories it produced, and waiting
for extraction (Python, asyncio and HTTP)."""

from __future__ import annotations

import asyncio
import threading

from sqlalchemy import update

from memoryd.async_client import AsyncMemoryClient
from memoryd.client import MemoryClient
from memoryd.extraction.batch import extract_session
from memoryd.models.db import session_scope
from memoryd.models.keys import SessionKey
from memoryd.models.tables import Memory, Turn, TurnStatus
from memoryd.settings import Settings

KEY = SessionKey("bot", "ann", "s1")
SAID = {"k-move": "I moved to Porto and I prefer green tea.", "k-hi": "Hello there!"}


def _enqueue(client: MemoryClient) -> None:
    for turn_key, content in SAID.items():
        client.enqueue_turn(
            agent_id="bot", user_id="ann", session_id="s1", role="user", content=content,
            turn_key=turn_key,
        )  # fmt: skip


def test_a_turn_is_pending_then_done_with_the_memories_it_produced(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    _enqueue(client)
    pending = client.turn_status("bot", "ann", "k-move")
    assert pending is not None and pending.status == "pending" and pending.memory_ids == []
    assert not pending.settled
    client.end_session("bot", "ann", "s1")
    extract_session(settings, KEY)
    done = client.turn_statuses("bot", "ann", ["k-hi", "k-move", "nope"])
    assert [(r.turn_key, r.status) for r in done] == [("k-hi", "done"), ("k-move", "done")]
    hi, move = done
    # A batch's memories name all its turns as their sources: both list them.
    assert hi.memory_ids == move.memory_ids and hi.settled
    with session_scope(settings.storage, readonly=True) as session:
        made = {m.content for m in session.query(Memory).filter(Memory.id.in_(move.memory_ids))}
    assert made == {"Lives in Porto", "Prefers green tea"}
    assert client.turn_status("bot", "ann", "nope") is None
    assert client.turn_status("bot", "bob", "k-move") is None  # another user's scope


def test_wait_extracted_returns_once_the_turns_are_settled(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    _enqueue(client)
    waited: list[object] = []
    waiter = threading.Thread(
        target=lambda: waited.extend(client.wait_extracted("bot", "ann", list(SAID), 20))
    )
    waiter.start()
    client.end_session("bot", "ann", "s1")
    extract_session(settings, KEY)
    waiter.join(25)
    assert [getattr(r, "status", None) for r in waited] == ["done", "done"]
    # Not settled within the timeout: the receipts as they stand.
    client.enqueue_turn(
        agent_id="bot", user_id="ann", session_id="s2", role="user", content="Hi", turn_key="k2"
    )
    [late] = client.wait_extracted("bot", "ann", ["k2"], timeout=0.3)
    assert late.status == "pending" and not late.settled


def test_a_dead_letter_is_settled_as_failed(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    _enqueue(client)
    with session_scope(settings.storage) as session:
        session.execute(update(Turn).values(status=TurnStatus.FAILED))
    [receipt] = client.wait_extracted("bot", "ann", ["k-move"], timeout=5)
    assert receipt.status == "failed" and receipt.settled


def test_asyncio_waits_without_a_thread(settings: Settings) -> None:
    async def scenario() -> list[str]:
        async with AsyncMemoryClient(settings, dispatch=False) as client:
            await client.enqueue_turn(
                agent_id="bot", user_id="ann", session_id="s1", role="user",
                content="I prefer oolong.", turn_key="k-a",
            )  # fmt: skip
            await client.end_session("bot", "ann", "s1")
            waiting = asyncio.create_task(client.wait_extracted("bot", "ann", ["k-a"], 20))
            await asyncio.to_thread(extract_session, settings, KEY)
            return [r.status for r in await waiting]

    assert asyncio.run(scenario()) == ["done"]
