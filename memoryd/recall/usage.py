"""Usage feedback: what recall returned and what the reply used feeds weights and promotion."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, select, text, update
from sqlalchemy.orm import Session

from memoryd.memories.store import lock_rows
from memoryd.memories.weights import MAX_WEIGHT, reinforced, restarted_ttl, ttl_restarted_at
from memoryd.models.bulk import write_rows
from memoryd.models.db import is_sqlite
from memoryd.models.keys import Scope
from memoryd.models.tables import Memory, MemoryUsage, Tier
from memoryd.recall.rank import FEEDBACK_COLUMNS, Hit
from memoryd.settings import Settings
from memoryd.text import search_tokens

MIN_TERM_CHARS = 3  # "to", "in", "a" say nothing about which memory was used


# What a reinforcement reads of its memories, under their row locks (see _reinforce).
_FRESH = (
    select(Memory.id, *FEEDBACK_COLUMNS)
    .where(Memory.id.in_(bindparam("ids", expanding=True)))
    .order_by(Memory.id)
)
_MEMORIES = cast(Table, Memory.__table__)
_USAGE = cast(Table, MemoryUsage.__table__)


def log_retrieval(
    session: Session,
    settings: Settings,
    scope: Scope,
    hits: Sequence[Hit],
    query: str,
    session_id: str | None,
    now: datetime,
) -> None:
    """One usage row per hit, naming the scope that asked (a shared memory's row too:
    erasing that user removes it); access counted, weight reinforced a little, TTL
    restarted.

    On PostgreSQL all of it is one statement that locks the rows and computes their new
    values from what it locked (_FEEDBACK), so a recall needs no transaction of its
    own. On SQLite, hits that recall read with the columns the new values are computed
    from (`recall(lock_hits=True)`) carry them; others are read here."""
    if not hits:
        return
    if not is_sqlite(session):
        asked = {"agent_id": scope.agent_id, "user_id": scope.user_id, "session_id": session_id}
        _feedback_on_postgres(session, settings, hits, asked | {"query": logged_query(query)}, now)
        return
    read = {hit.id: hit.feedback for hit in hits}
    if all(row is not None for row in read.values()):
        fresh: Sequence[Any] = list(read.values())
    else:
        fresh = _locked(session, list(read))
        present = {row.id for row in fresh}
        hits = [hit for hit in hits if hit.id in present]  # none erased since ranking
        if not hits:
            return
    changes = _reinforced(settings, fresh, settings.reinforce_retrieved, now, retrieved=True)
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
    }
    if changes:
        write_rows(session, _MEMORIES, changes, key="id")
    write_rows(session, _USAGE, usage, key=None)


def logged_query(query: str) -> str:
    """What a usage row keeps of the query: its start (PostgreSQL text holds no NUL)."""
    return query[:2000].replace("\x00", "")


# A retrieval's feedback on PostgreSQL, in one statement and so one round trip: the hits
# locked in id order (the order every writer of many memories locks them in), their
# new weight (decayed, plus the reinforcement, within 0..max), access columns and TTL
# computed from the locked rows as weights.reinforced and _retrieved compute them, and
# a usage row for each hit still there. synchronous_commit is off for it: usage rows and
# access counts are feedback, not user data, so losing the last instant of them in a
# server crash is harmless, and recall does not wait for a WAL flush (the tail of its
# latency on a busy disk).
_FEEDBACK = text("""
WITH locked AS (
    SELECT id FROM memories WHERE id = ANY(CAST(:ids AS bigint[])) ORDER BY id FOR UPDATE
), reinforced AS (
    UPDATE memories AS m SET
        weight = least(greatest(
            m.weight * power(0.5, greatest(
                extract(epoch FROM CAST(:now AS timestamptz) - m.weight_at), 0
            ) / 86400.0 / CASE WHEN m.tier = 'long' THEN :long_days ELSE :short_days END)
            + :amount, 0), :max_weight),
        weight_at = :now,
        last_accessed_at = :now,
        expires_at = CASE WHEN m.tier = 'short' AND m.expires_at IS NOT NULL
            THEN greatest(m.expires_at, :ttl_restarted) ELSE m.expires_at END,
        access_count = m.access_count + 1,
        promotable_at = coalesce(m.promotable_at, CASE
            WHEN m.tier = 'short' AND m.access_count + 1 >= :promote_count THEN :now END)
    FROM locked WHERE m.id = locked.id
    RETURNING m.id
), relaxed AS (
    SELECT set_config('synchronous_commit', 'off', true)
)
INSERT INTO memory_usage
    (memory_id, agent_id, user_id, session_id, query, score, referenced, created_at)
SELECT hit.id, :agent_id, :user_id, :session_id, :query, hit.score, false, :now
FROM unnest(CAST(:ids AS bigint[]), CAST(:scores AS float8[])) AS hit(id, score)
JOIN reinforced ON reinforced.id = hit.id
CROSS JOIN relaxed
""")


def _feedback_on_postgres(
    session: Session, settings: Settings, hits: Sequence[Hit], logged: dict[str, Any], now: datetime
) -> None:
    """_FEEDBACK for `hits`; `logged`: the usage rows' agent, user, session and query."""
    params = logged | {
        "ids": [hit.id for hit in hits],
        "scores": [hit.score for hit in hits],
        "now": now,
        "long_days": settings.half_life_long_days,
        "short_days": settings.half_life_short_days,
        "amount": settings.reinforce_retrieved,
        "max_weight": MAX_WEIGHT,
        "ttl_restarted": ttl_restarted_at(now, settings),
        "promote_count": settings.promote_access_count,
    }
    session.connection().execute(_FEEDBACK, params)


def _reinforce(
    session: Session,
    settings: Settings,
    ids: Sequence[int],
    amount: float,
    now: datetime,
    *,
    retrieved: bool,
) -> None:
    """Reinforce memories atomically: see _locked and _reinforced. One statement each way."""
    fresh = _locked(session, ids)
    if fresh:
        write_rows(
            session,
            _MEMORIES,
            _reinforced(settings, fresh, amount, now, retrieved=retrieved),
            key="id",
        )


def _locked(session: Session, ids: Sequence[int]) -> Sequence[Any]:
    """The memories' FEEDBACK_COLUMNS, re-read under their row locks, taken in id order
    (so concurrent recalls queue instead of deadlocking)."""
    locked = lock_rows(session, _FRESH)
    return session.connection().execute(locked, {"ids": sorted(set(ids))}).all()


def _reinforced(
    settings: Settings, fresh: Sequence[Any], amount: float, now: datetime, *, retrieved: bool
) -> dict[str, list[Any]]:
    """The new column values (one list per column, "id" first; none without rows) of
    rows read under their locks: every value is computed from what was read under the
    lock, so an access, a concurrent recall's increment or a promotion's tier change is
    never lost or overwritten.

    Only unindexed columns change, except expires_at once an hour and promotable_at
    once in a memory's life, so the row is rewritten in place (see tables.Memory)."""
    if not fresh:
        return {}
    changes = [
        reinforced(row.tier, row.weight, row.weight_at, amount, now, settings)
        | (_retrieved(settings, row, now) if retrieved else {})
        for row in fresh
    ]
    columns = {"id": [row.id for row in fresh]}
    columns.update({c: [change[c] for change in changes] for c in changes[0]})
    return columns


def _retrieved(settings: Settings, row: Any, now: datetime) -> dict[str, Any]:
    """The access columns after one more retrieval of a row read under its lock."""
    count = row.access_count + 1
    reaches_promotion = row.tier == Tier.SHORT and count >= settings.promote_access_count
    return {
        "last_accessed_at": now,
        "expires_at": restarted_ttl(row.tier, row.expires_at, now, settings),
        "access_count": count,
        "promotable_at": row.promotable_at or (now if reaches_promotion else None),
    }


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
    used = used_in_reply(reply_text, hits, settings.referenced_similarity)
    if not used:
        return []
    ids = [h.id for h in used]
    _reinforce(session, settings, ids, settings.reinforce_referenced, now, retrieved=False)
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
