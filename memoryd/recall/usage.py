"""Usage feedback: what recall returned and what the reply used feeds weights and promotion."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, text, update
from sqlalchemy.orm import Session

from memoryd.memories.weights import reinforce_referenced, reinforce_retrieved
from memoryd.models.db import is_sqlite
from memoryd.models.tables import Memory, MemoryUsage
from memoryd.recall.rank import Hit
from memoryd.settings import Settings
from memoryd.text import search_tokens

MIN_TERM_CHARS = 3  # "to", "in", "a" say nothing about which memory was used


def log_retrieval(
    session: Session,
    settings: Settings,
    hits: Sequence[Hit],
    query: str,
    session_id: str | None,
    now: datetime,
) -> None:
    """One usage row per hit; access counted, weight reinforced a little, TTL restarted."""
    if not hits:
        return
    if not is_sqlite(session):
        # Usage rows and access counts are feedback, not user data: losing the last
        # instant of them in a server crash is harmless, and recall then does not
        # wait for a WAL flush (the tail of its latency on a busy disk).
        session.execute(text("SET LOCAL synchronous_commit = off"))
    # One query, then no autoflush inside the loop: the updates and inserts go out as
    # one batch each at the flush below, not one round trip per hit.
    memories = {
        m.id: m for m in session.scalars(select(Memory).where(Memory.id.in_([h.id for h in hits])))
    }
    for hit in hits:
        memory = memories.get(hit.id)
        if memory is None:
            continue
        reinforce_retrieved(memory, now, settings)
        session.add(
            MemoryUsage(
                memory_id=hit.id,
                agent_id=hit.agent_id,
                user_id=hit.user_id,
                session_id=session_id,
                query=query[:2000],
                score=hit.score,
                referenced=False,
                created_at=now,
            )
        )
    session.flush()


def _terms(text: str) -> set[str]:
    return {t for t in search_tokens(text) if not (t.isascii() and len(t) < MIN_TERM_CHARS)}


def used_in_reply(reply_text: str, hits: Sequence[Hit], threshold: float) -> list[Hit]:
    """The hits the reply used: most of each memory's distinctive terms (those no other
    recalled memory shares) appear in the reply, so "allergic to peanuts" and "allergic
    to cats" are told apart by "peanuts" and "cats". Works for unsegmented scripts too,
    whose terms are characters and character pairs."""
    reply = reply_text.casefold()
    reply_terms = _terms(reply_text)
    terms = [_terms(f"{h.content}") for h in hits]
    used = []
    for i, hit in enumerate(hits):
        others = set().union(*(t for j, t in enumerate(terms) if j != i))
        distinctive = (terms[i] - others) or terms[i]
        if not distinctive:
            continue
        present = sum(1 for t in distinctive if t in reply_terms or t in reply)
        if present / len(distinctive) >= threshold:
            used.append(hit)
    return used


def mark_referenced(
    session: Session,
    settings: Settings,
    reply_text: str,
    hits: Sequence[Hit],
    session_id: str | None,
    now: datetime,
) -> list[int]:
    """Reinforce the recalled memories the reply actually used; returns their ids."""
    used = used_in_reply(reply_text, hits, settings.referenced_similarity)
    if not used:
        return []
    ids = [h.id for h in used]
    for memory in session.scalars(select(Memory).where(Memory.id.in_(ids))):
        reinforce_referenced(memory, now, settings)
    latest = (
        select(MemoryUsage.id)
        .where(MemoryUsage.memory_id.in_(ids))
        .order_by(MemoryUsage.id.desc())
        .limit(len(ids))
    )
    if session_id is not None:
        latest = latest.where(MemoryUsage.session_id == session_id)
    session.execute(
        update(MemoryUsage)
        .where(MemoryUsage.id.in_(latest.scalar_subquery()))
        .values(referenced=True)
    )
    session.flush()
    return ids
