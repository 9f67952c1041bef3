"""Factories for test data, written through the same functions the pipeline uses."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session

from memoryd.ingest.buffer import ingest
from memoryd.maintenance.usage import fold_chunk
from memoryd.memories.proposals import Fact
from memoryd.memories.store import create_memory
from memoryd.models.base import TurnStatus
from memoryd.models.db import get_engine, session_scope, utcnow
from memoryd.models.keys import Scope
from memoryd.models.tables import Actor, Category, Memory, Turn
from memoryd.recall.hits import Hit, ScoreParts
from memoryd.recall.usage import log_retrieval
from memoryd.settings import Settings


def make_memory(
    session: Session,
    settings: Settings,
    content: str = "Prefers tea",
    *,
    agent_id: str = "bot",
    user_id: str = "ann",
    confidence: float = 0.95,
    category: Category = Category.USER,
    temporary: str = "no",
    now: datetime | None = None,
    **columns: Any,
) -> Memory:
    fact = Fact(content=content, confidence=confidence, category=category, temporary=temporary)
    memory = create_memory(
        session, settings, Scope(agent_id, user_id), fact, now or utcnow(), actor=Actor.API
    )
    for name, value in columns.items():
        setattr(memory, name, value)
    session.flush()
    return memory


def turn_item(i: int = 0, **fields: Any) -> dict[str, Any]:
    """One ingest payload item of bot/ann/s1 (fields override)."""
    return {
        "agent_id": "bot",
        "user_id": "ann",
        "session_id": "s1",
        "role": "user",
        "content": f"message {i}",
        **fields,
    }


def add_turns(settings: Settings, n: int, start: int = 0, **fields: Any) -> list[int]:
    """Store n turns through the real ingest path; returns their ids."""
    result, _due = ingest(settings, [turn_item(start + i, **fields) for i in range(n)], utcnow())
    assert not result.rejected, result.rejected
    return result.turn_ids


def count_turns(session: Session, status: str | None = None) -> int:
    stmt = select(func.count()).select_from(Turn)
    if status:
        stmt = stmt.where(Turn.status == status)
    count = int(session.scalar(stmt) or 0)
    session.commit()  # end the read: an open SQLite write transaction holds the lock
    return count


# A hit's score parts when it came first in the keyword list.
FIRST_PARTS = ScoreParts(
    keyword_rank=1,
    similarity=0.0,
    embedding=None,
    fused=1.0,
    strength=0.5,
    recency=1.0,
    confidence=1.0,
)


def retrieve(session: Session, settings: Settings, memories: list[Memory], now: datetime) -> None:
    """A recall in the first memory's scope returned these memories at `now` (its usage
    rows, usage.log_retrieval) and maintenance folded them into the memories."""
    hits = [Hit.from_memory(memory, score=1.0, parts=FIRST_PARTS) for memory in memories]
    scope = Scope(memories[0].agent_id, memories[0].user_id)
    log_retrieval(session, settings.recall, scope, hits, "what do you remember", None, now)
    fold_chunk(session, settings.memories)


def turns_of_months(settings: Settings, backlog: int = 0) -> None:
    """A PostgreSQL store of months: forty users' turns and ann's 2,000 in one session
    (bot/ann/s1), all extracted long ago, and three of ann's sent since; with `backlog`,
    that many turns of sixty other users waiting too (an outage, an import). The table
    analysed as autovacuum keeps it."""
    for n in range(40):
        add_turns(settings, 50, user_id=f"other-{n}")
    add_turns(settings, 2000)
    with session_scope(settings.storage) as session:
        session.execute(update(Turn).values(status=TurnStatus.DONE))
    add_turns(settings, 3, start=2000)
    if backlog:
        waiting = [turn_item(i, user_id=f"waiting-{i % 60}") for i in range(backlog)]
        assert not ingest(settings, waiting, utcnow())[0].rejected
    with get_engine(settings.storage).connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("VACUUM ANALYZE turns"))
