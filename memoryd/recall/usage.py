"""Usage feedback: what recall returned and what the reply used feeds weights and promotion."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, select, text, update
from sqlalchemy.orm import Session

from memoryd.memories.feedback import locked_feedback
from memoryd.memories.weights import reinforced
from memoryd.models.bulk import write_rows
from memoryd.models.db import is_sqlite
from memoryd.models.keys import Scope
from memoryd.models.tables import Memory, MemoryUsage
from memoryd.recall.hits import Hit
from memoryd.settings import MemorySettings, RecallSettings, Settings
from memoryd.text import search_tokens

MIN_TERM_CHARS = 3  # "to", "in", "a" say nothing about which memory was used


_MEMORIES = cast(Table, Memory.__table__)
_USAGE = cast(Table, MemoryUsage.__table__)


def log_retrieval(
    session: Session,
    settings: RecallSettings,
    scope: Scope,
    hits: Sequence[Hit],
    query: str,
    session_id: str | None,
    now: datetime,
) -> None:
    """One usage row per hit, naming the scope that asked (a shared memory's row too:
    erasing that user removes it), in one statement. Nothing else is written and no row
    is locked: maintenance/usage.py folds the rows into access counts, weights, TTLs and
    promotion.

    On PostgreSQL synchronous_commit is off for it: usage rows are feedback, not user
    data, so losing the last instant of them in a server crash is harmless, and recall
    does not wait for a WAL flush (the tail of its latency on a busy disk)."""
    if not hits:
        return
    if not is_sqlite(session):
        session.connection().execute(
            _LOG_RELAXED,
            {
                "ids": [hit.id for hit in hits],
                "scores": [hit.score for hit in hits],
                "agent_id": scope.agent_id,
                "user_id": scope.user_id,
                "session_id": session_id,
                "query": logged_query(query),
                "now": now,
            },
        )
        return
    n = len(hits)
    usage: dict[str, list[Any]] = {
        "memory_id": [hit.id for hit in hits],
        "agent_id": [scope.agent_id] * n,
        "user_id": [scope.user_id] * n,
        "session_id": [session_id] * n,
        "query": [logged_query(query)] * n,
        "score": [hit.score for hit in hits],
        "referenced": [False] * n,
        "created_at": [now] * n,
        "folded": [False] * n,
    }
    write_rows(session, _USAGE, usage, key=None)


def logged_query(query: str) -> str:
    """What a usage row keeps of the query: its start (PostgreSQL text holds no NUL)."""
    return query[:2000].replace("\x00", "")


# A retrieval's usage rows on PostgreSQL, without waiting for the WAL flush. Their
# memories are locked FOR KEY SHARE first, by ascending id: what the foreign key check
# would take anyway, in the order every writer of many memories locks them, so a
# writer locking two of them cannot deadlock with it; and a memory deleted since it
# was ranked drops out of `locked` (its row would break the foreign key).
_LOG_RELAXED = text("""
WITH relaxed AS (
    SELECT set_config('synchronous_commit', 'off', true)
), locked AS (
    SELECT id FROM memories WHERE id = ANY(CAST(:ids AS bigint[])) ORDER BY id FOR KEY SHARE
)
INSERT INTO memory_usage
    (memory_id, agent_id, user_id, session_id, query, score, referenced, created_at, folded)
SELECT hit.id, :agent_id, :user_id, :session_id, :query, hit.score, false, :now, false
FROM unnest(CAST(:ids AS bigint[]), CAST(:scores AS float8[])) AS hit(id, score)
JOIN locked ON locked.id = hit.id
CROSS JOIN relaxed
""")


def _reinforce(
    session: Session, settings: Settings, ids: Sequence[int], amount: float, now: datetime
) -> None:
    """Reinforce memories atomically: see locked_feedback and _reinforced. One statement
    each way."""
    fresh = locked_feedback(session, ids)
    if fresh:
        write_rows(session, _MEMORIES, _reinforced(settings.memories, fresh, amount, now), key="id")


def _reinforced(
    settings: MemorySettings, fresh: Sequence[Any], amount: float, now: datetime
) -> dict[str, list[Any]]:
    """The new weight columns (one list per column, "id" first) of rows read under their
    locks: computed from what was read under the lock, so a concurrent change is never
    lost or overwritten. Only unindexed columns change, so the row is rewritten in place
    (see tables.Memory)."""
    changes = [
        reinforced(row.tier, row.weight, row.weight_at, amount, now, settings) for row in fresh
    ]
    columns = {"id": [row.id for row in fresh]}
    columns.update({c: [change[c] for change in changes] for c in changes[0]})
    return columns


def _terms(text: str) -> set[str]:
    return {t for t in search_tokens(text) if not (t.isascii() and len(t) < MIN_TERM_CHARS)}


def used_in_reply(reply_text: str, hits: Sequence[Hit], threshold: float) -> list[Hit]:
    """The hits the reply used: most of each memory's distinctive terms (those no other
    recalled memory shares) appear in the reply, so "allergic to peanuts" and "allergic
    to cats" are told apart by "peanuts" and "cats". Works for unsegmented scripts too,
    whose terms are characters and character pairs."""
    hits = [h for h in hits if not h.pending]  # a turn not yet extracted is no memory
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
    used = used_in_reply(reply_text, hits, settings.recall.referenced_similarity)
    if not used:
        return []
    ids = [h.id for h in used]
    _reinforce(session, settings, ids, settings.memories.reinforce_referenced, now)
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
