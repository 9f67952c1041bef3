"""As-of reads: what memoryd knew about a scope at a past moment, from the history it
already stores (memory_events), never from a copy.

A memory stood at `when` in the status its last event at or before it left it in: a
retirement (superseded, expired, archived, deleted) or, after any other event (created,
updated, promoted, restored…), active; memories created after `when` are not shown. Its
text is the one its last event up to `when` recorded, so an edit made since is not read
back into the past. Memories purged by retention or erased are gone from the history
too, and so from these reads.

These reads write nothing: no usage is logged and no weight moves, since a look into
the past is an audit, not a use. Ranking is by keywords (BM25 over the texts as they
were); stored vectors describe today's text, so meaning does not take part."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, AwareDatetime, BeforeValidator
from sqlalchemy import func, select
from sqlalchemy.orm import Session, defer

from memoryd.models.base import EventKind, MemoryStatus
from memoryd.models.keys import Scope
from memoryd.models.schemas import MAX_PAGE, MemoryOut
from memoryd.models.tables import Memory, MemoryEvent
from memoryd.recall.bm25 import POINTS, term_weights
from memoryd.recall.hits import Hit, ScoreParts
from memoryd.recall.keyword_scan import bm25_points
from memoryd.recall.search import ScopeStats, narrowing
from memoryd.text import memory_search_text, query_term_counts

# The status an event leaves a memory in; the other kinds (created, confirmed,
# updated, promoted, restored) leave it active.
STATUS_AFTER = {
    EventKind.SUPERSEDED: MemoryStatus.SUPERSEDED,
    EventKind.EXPIRED: MemoryStatus.EXPIRED,
    EventKind.ARCHIVED: MemoryStatus.ARCHIVED,
    EventKind.DELETED: MemoryStatus.DELETED,
}


def _iso_text(value: Any) -> Any:
    """A moment given as text must be ISO 8601: pydantic would also read a number, or a
    string of digits, as seconds since 1970."""
    if isinstance(value, int | float) or (isinstance(value, str) and _DIGITS.fullmatch(value)):
        raise ValueError("give a date and time in ISO 8601, e.g. 2026-03-01T00:00:00Z")
    return value


def _in_utc_calendar(moment: datetime) -> datetime:
    """A moment the database can compare: one whose UTC time is still within the years 1
    to 9999 (0001-01-01T00:00:00+14:00 is not, and failed its statement)."""
    try:
        moment.astimezone(UTC)
    except OverflowError:
        raise ValueError("out of range: its time in UTC must fall in the years 1 to 9999") from None
    return moment


_DIGITS = re.compile(r"\s*[+-]?[\d.]+([eE][+-]?\d+)?\s*")
# What as_of takes from outside (HTTP, MCP): an ISO 8601 moment with a timezone.
Moment = Annotated[AwareDatetime, BeforeValidator(_iso_text), AfterValidator(_in_utc_calendar)]


def checked_instant(as_of: datetime | None) -> datetime | None:
    """`as_of` as given, refused when it carries no timezone (a naive moment would be
    read as UTC on one server and local time on another) or falls outside the calendar
    in UTC."""
    if as_of is not None and as_of.utcoffset() is None:
        raise ValueError("as_of needs a timezone, e.g. 2026-03-01T00:00:00+00:00")
    if as_of is not None:
        try:
            _in_utc_calendar(as_of)
        except ValueError as exc:
            raise ValueError(f"as_of {exc}") from None
    return as_of


def paged(memories: list[MemoryOut], limit: int, offset: int) -> list[MemoryOut]:
    """A page of a list read whole, with the bounds of the stored list's pages."""
    start = max(0, offset)
    return memories[start : start + max(0, min(limit, MAX_PAGE))]


@dataclass(frozen=True)
class _Past:
    """A memory as it stood at the moment asked about."""

    memory: Memory
    content: str
    status: str

    @property
    def active(self) -> bool:
        return self.status == MemoryStatus.ACTIVE


def memories_as_of(
    session: Session,
    scope: Scope,
    when: datetime,
    statuses: Sequence[str] = (MemoryStatus.ACTIVE,),
    categories: Sequence[str] | None = None,
    tiers: Sequence[str] | None = None,
) -> list[MemoryOut]:
    """The scope's memories (and its agent's shared ones) that had one of `statuses` at
    `when`, with the status and text they had then, newest first."""
    pasts = _stood_at(session, scope, when, categories, tiers)
    return [_out(past) for past in pasts if past.status in statuses]


def recall_as_of(
    session: Session,
    scope: Scope,
    query: str,
    when: datetime,
    k: int,
    categories: Sequence[str] | None = None,
    tiers: Sequence[str] | None = None,
) -> list[Hit]:
    """The k memories active at `when` that best match `query`'s keywords; with no
    search terms, the newest of them."""
    pasts = [p for p in _stood_at(session, scope, when, categories, tiers) if p.active]
    counts = query_term_counts(query)
    scored = _bm25(pasts, counts) if counts else [(0.0, p) for p in pasts]
    scored.sort(key=lambda pair: pair[0], reverse=True)  # stable: newest first on ties
    return [_hit(past, score, rank) for rank, (score, past) in enumerate(scored[:k], 1)]


def _stood_at(
    session: Session,
    scope: Scope,
    when: datetime,
    categories: Sequence[str] | None,
    tiers: Sequence[str] | None,
) -> list[_Past]:
    stmt = (
        select(Memory)
        .where(Memory.readable_by(scope), Memory.created_at <= when)
        .where(*narrowing(categories, tiers))
        .order_by(Memory.created_at.desc(), Memory.id.desc())
        .options(defer(Memory.vector), defer(Memory.search_text))  # unused here, and large
    )
    memories = list(session.scalars(stmt))
    last = _last_events(session, [m.id for m in memories], when)
    return [_past(m, last.get(m.id)) for m in memories]


def _last_events(session: Session, ids: list[int], when: datetime) -> dict[int, MemoryEvent]:
    """Each memory's last event at or before `when`: one row per memory is read, however
    many confirmations and edits its history holds."""
    last: dict[int, MemoryEvent] = {}
    for start in range(0, len(ids), 500):  # bounded IN lists
        newest = (
            select(func.max(MemoryEvent.id))
            .where(MemoryEvent.memory_id.in_(ids[start : start + 500]))
            .where(MemoryEvent.created_at <= when)
            .group_by(MemoryEvent.memory_id)
        )
        for event in session.scalars(select(MemoryEvent).where(MemoryEvent.id.in_(newest))):
            last[event.memory_id] = event
    return last


def _past(memory: Memory, event: MemoryEvent | None) -> _Past:
    if event is None:  # no history recorded: a row older than its events, read as it is
        return _Past(memory, memory.content, memory.status)
    content = event.after_content if event.after_content is not None else memory.content
    return _Past(memory, content, STATUS_AFTER.get(EventKind(event.kind), MemoryStatus.ACTIVE))


def _out(past: _Past) -> MemoryOut:
    return MemoryOut.from_memory(past.memory).model_copy(update=_then(past))


def _then(past: _Past) -> dict[str, Any]:
    return {"content": past.content, "status": str(past.status)}


def _bm25(pasts: list[_Past], counts: dict[str, int]) -> list[tuple[float, _Past]]:
    """BM25 with the constants of the keyword index (recall/bm25.py) and its weights for
    repeats, without a dialogue's last line's, over the texts as they were; only
    memories holding a term (of `counts`, the query's terms and how often it says each)
    are kept."""
    docs = [Counter(memory_search_text(p.memory.name, p.content).split()) for p in pasts]
    sized = [(doc, sum(doc.values())) for doc in docs]
    stats = ScopeStats(len(sized), sum(length for _, length in sized))
    terms = list(counts)
    points = bm25_points(sized, terms, stats, term_weights(terms, counts))
    return [(p / POINTS, past) for p, past in zip(points, pasts, strict=True) if p]


def _hit(past: _Past, score: float, rank: int) -> Hit:
    parts = ScoreParts(
        keyword_rank=rank if score > 0 else None,
        bm25=score or None,
        similarity=0.0,
        embedding=None,
        fused=score,
        strength=0.0,
        recency=0.0,
        confidence=past.memory.confidence,
    )
    fields = MemoryOut.from_memory(past.memory).model_dump() | _then(past)
    return Hit(**fields, score=round(score, 4), parts=parts)
