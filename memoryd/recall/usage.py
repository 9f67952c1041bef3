"""Usage feedback: what recall returned and what the reply used feeds weights and promotion."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, func, insert, select, true, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.expression import Executable

from memoryd.memories.store import lock_rows
from memoryd.memories.weights import reinforced, restarted_ttl
from memoryd.models.bulk import json_rows, json_table, pg_update, write_rows
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

    Hits that recall read under their row locks (`recall(lock_hits=True)`) carry the
    columns the new values are computed from; others are locked and read here. On
    PostgreSQL the rows' changes and the usage rows then go in one statement."""
    if not hits:
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
        "query": [query[:2000].replace("\x00", "")] * n,  # PostgreSQL text holds no NUL
        "score": [hit.score for hit in hits],
        "referenced": [False] * n,
        "created_at": [now] * n,
    }
    if changes and not is_sqlite(session):
        statement = _feedback_statement(tuple(changes), tuple(usage))
        params = {"changes": json_rows(changes), "usage": json_rows(usage)}
        session.connection().execute(statement, params)
        return
    if changes:
        write_rows(session, _MEMORIES, changes, key="id")
    write_rows(session, _USAGE, usage, key=None)


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


@functools.cache
def _feedback_statement(changed: tuple[str, ...], logged: tuple[str, ...]) -> Executable:
    """A retrieval's feedback on PostgreSQL in one round trip: the hits' new columns (a
    data-modifying CTE), their usage rows, and synchronous_commit off for the
    transaction. Usage rows and access counts are feedback, not user data: losing the
    last instant of them in a server crash is harmless, and recall then does not wait
    for a WAL flush (the tail of its latency on a busy disk)."""
    reinforce = pg_update(_MEMORIES, changed, "id", "changes").cte("reinforced")
    relaxed = select(func.set_config("synchronous_commit", "off", true()).label("setting")).cte(
        "relaxed"
    )
    usage = json_table(_USAGE, logged, "usage")
    rows = select(*usage.c).select_from(usage).join(relaxed, true())
    return insert(_USAGE).from_select(list(logged), rows).add_cte(reinforce)


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
