"""As-of reads: what memory held at a past moment, from the history it keeps, through a
chain of replacements, an edit and a deletion; and such a look back is no use."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from freezegun import freeze_time

from memoryd import AsyncMemoryClient
from memoryd.client import MemoryClient
from memoryd.maintenance.usage import fold_usage
from memoryd.memories.edits import forget
from memoryd.models.db import session_scope
from memoryd.models.keys import Scope
from memoryd.settings import Settings
from tests.factories import make_memory

JAN, MAR, APR, MAY, JUL = (datetime(2026, month, 10, 9, tzinfo=UTC) for month in (1, 3, 4, 5, 7))
WHERE = "where does ann live"
CAT = "what is the cat called"


def on(month: int, day: int = 20) -> datetime:
    return datetime(2026, month, day, tzinfo=UTC)


def said_over_months(client: MemoryClient) -> int:
    """Berlin (Jan) → Lisbon (Mar) → Porto (May); a cat named Tom (Jan), renamed in Apr,
    forgotten in Jul. Returns the cat memory's id."""
    with freeze_time(JAN):
        berlin = client.remember("bot", "ann", "Lives in Berlin", name="home city")
        cat = client.remember("bot", "ann", "Has a cat called Tom", name="cat")
    with freeze_time(MAR):
        lisbon = client.remember(
            "bot", "ann", "Lives in Lisbon", name="home city", replaces=berlin.id
        )
    with freeze_time(APR):
        client.update("bot", "ann", cat.id, content="Has a cat called Tomasz")
    with freeze_time(MAY):
        client.remember("bot", "ann", "Lives in Porto", name="home city", replaces=lisbon.id)
    with freeze_time(JUL):
        client.forget("bot", "ann", cat.id)
    return cat.id


def contents(memories: list[object]) -> list[str]:
    return [str(getattr(m, "content", "")) for m in memories]


@pytest.fixture
def client(settings: Settings) -> MemoryClient:
    return MemoryClient(settings, dispatch=False)


def test_recall_as_of_answers_what_was_true_then(client: MemoryClient) -> None:
    said_over_months(client)
    assert client.recall(WHERE, "bot", "ann", as_of=on(1, 1)) == []  # nothing known yet
    assert contents(client.recall(WHERE, "bot", "ann", as_of=on(2))) == ["Lives in Berlin"]
    assert contents(client.recall(WHERE, "bot", "ann", as_of=on(4))) == ["Lives in Lisbon"]
    assert contents(client.recall(WHERE, "bot", "ann", as_of=on(6))) == ["Lives in Porto"]
    assert contents(client.recall(WHERE, "bot", "ann")) == ["Lives in Porto"]
    # The text it had then, not today's edit; gone from the day it was forgotten.
    assert contents(client.recall(CAT, "bot", "ann", as_of=on(2))) == ["Has a cat called Tom"]
    assert contents(client.recall(CAT, "bot", "ann", as_of=on(6))) == ["Has a cat called Tomasz"]
    assert client.recall(CAT, "bot", "ann", as_of=on(8)) == []
    hit = client.recall(WHERE, "bot", "ann", as_of=on(2))[0]
    assert hit.status == "active" and hit.score > 0  # as it stood then


def test_list_and_context_as_of(client: MemoryClient) -> None:
    said_over_months(client)
    listed = client.list("bot", "ann", as_of=on(3))
    assert contents(listed) == ["Lives in Lisbon", "Has a cat called Tom"]  # newest first
    assert contents(client.list("bot", "ann", as_of=on(8))) == ["Lives in Porto"]
    assert contents(client.list("bot", "ann", as_of=on(3), limit=1, offset=1)) == [
        "Has a cat called Tom"
    ]
    block = client.build_context(WHERE, "bot", "ann", as_of=on(4))
    assert "Lives in Lisbon" in block and "Porto" not in block and "Berlin" not in block
    retired = client.list("bot", "ann", statuses=["superseded", "deleted"], as_of=on(6))
    assert [(m.content, m.status) for m in retired] == [
        ("Lives in Lisbon", "superseded"),
        ("Lives in Berlin", "superseded"),
    ]
    gone = client.list("bot", "ann", statuses=["deleted"], as_of=on(8))
    assert [(m.content, m.status) for m in gone] == [("Has a cat called Tomasz", "deleted")]
    with pytest.raises(ValueError, match="timezone"):
        client.recall(WHERE, "bot", "ann", as_of=datetime(2026, 4, 1))


def test_a_look_back_is_not_a_use(client: MemoryClient) -> None:
    said_over_months(client)
    before = {m.id: m.access_count for m in client.list("bot", "ann")}
    client.recall(WHERE, "bot", "ann", as_of=on(6))
    client.build_context(WHERE, "bot", "ann", as_of=on(6))
    assert fold_usage(client.settings) == 0  # no usage row was written
    assert {m.id: m.access_count for m in client.list("bot", "ann")} == before
    client.recall(WHERE, "bot", "ann")
    assert fold_usage(client.settings) == 1
    assert {m.id: m.access_count for m in client.list("bot", "ann")} != before


def test_the_async_client_reads_the_past_too(settings: Settings) -> None:
    said_over_months(MemoryClient(settings, dispatch=False))

    async def scenario() -> list[str]:
        async with AsyncMemoryClient(settings, dispatch=False) as memory:
            return contents(await memory.recall(WHERE, "bot", "ann", as_of=on(4)))

    assert asyncio.run(scenario()) == ["Lives in Lisbon"]


def test_the_past_is_read_right_behind_thousands_of_memories(settings: Settings) -> None:
    """A scope of a user of months: 2,000 other memories, a few hundred since forgotten,
    around the chain of moves."""
    client = MemoryClient(settings, dispatch=False)
    with session_scope(settings.storage) as session:
        for i in range(2000):
            noted = make_memory(
                session, settings, f"Colleague {i} lives near office {i % 40}", now=on(2, 1)
            )
            if i % 7 == 0:
                forget(session, Scope("bot", "ann"), noted.id, on(6, 1))
    said_over_months(client)
    asked = "where does ann live, which home city?"
    assert contents(client.recall(asked, "bot", "ann", k=1, as_of=on(4))) == ["Lives in Lisbon"]
    assert len(client.list("bot", "ann", as_of=on(5), limit=500)) == 500
    deleted = client.list("bot", "ann", statuses=["deleted"], as_of=on(8), limit=500)
    assert len(deleted) == 286 + 1  # every seventh colleague, and the cat
    assert client.list("bot", "ann", statuses=["deleted"], as_of=on(5)) == []
