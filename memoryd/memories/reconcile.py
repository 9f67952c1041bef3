"""Reconcile accepted facts with what the scope already remembers.

Runs inside the batch's write transaction under the per-scope lock, so two workers
proposing the same fact for one user cannot both create it.

What a fact is reconciled with, at any scope size:
- the memories the extractor named (`same_as`, `replaces`), by their prompt aliases;
- an exact duplicate, by content hash (indexed);
- the memories with the same subject key and category (indexed, memories/subjects.py):
  a single-valued slot ("home city") keeps one value, so a new one retires them all,
  whether the extractor was shown them or not;
- near duplicates among those, the batch's own new memories and `nearby`: the memories
  the caller's ranked search found for the fact (recall/candidates.py).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy import and_, or_, select
from sqlalchemy.exc import DataError
from sqlalchemy.orm import Session
from sqlalchemy.sql import ColumnElement

from memoryd.memories.proposals import Fact
from memoryd.memories.store import (
    as_day_start,
    confirm_memory,
    create_memory,
    lock_memory,
    record_event,
    set_content,
    supersede_memory,
)
from memoryd.memories.subjects import SAME_KEY_LIMIT, key_categories, key_for
from memoryd.models.base import written_in
from memoryd.models.dialect import for_update
from memoryd.models.keys import Scope
from memoryd.models.tables import Actor, EventKind, Memory, MemoryStatus
from memoryd.settings import ExtractionSettings, Settings
from memoryd.text import content_hash, similarity

log = logging.getLogger(__name__)

Nearby = Mapping[str, Sequence[int]]  # a fact's content hash -> memory ids found for it


@dataclass
class ReconcileCounts:
    created: int = 0
    confirmed: int = 0
    superseded: int = 0
    kept: list[Memory] = field(default_factory=list)  # the memory each fact ended up in


@dataclass
class _Run:
    """One call's shared state: where it writes, and what it created so far."""

    session: Session
    settings: Settings
    scope: Scope
    aliases: Mapping[int, int]
    now: datetime
    nearby: Nearby
    said_at: datetime | None
    metadata: dict[str, Any] | None
    writer: dict[str, Any]  # actor, batch_id and source_turn_ids of every write
    counts: ReconcileCounts = field(default_factory=ReconcileCounts)
    # Every memory the facts may find or change, read (and locked) once before the
    # writes, by id; and those this call created. Held by this transaction from the
    # read on, they are matched here in memory, without a statement per fact.
    read: dict[int, Memory] = field(default_factory=dict)
    created: list[Memory] = field(default_factory=list)

    def known(self) -> list[Memory]:
        """The memories read and those created, oldest first."""
        return sorted([*self.read.values(), *self.created], key=lambda m: m.id)

    def holds(self, memory: Memory) -> bool:
        """Whether this transaction already holds `memory` as read: no re-read needed."""
        return memory.id in self.read or memory in self.created


def reconcile_facts(
    session: Session,
    settings: Settings,
    scope: Scope,
    facts: Sequence[Fact],
    aliases: Mapping[int, int],
    now: datetime,
    *,
    actor: Actor = Actor.EXTRACTOR,
    batch_id: int | None = None,
    source_turn_ids: list[int] | None = None,
    metadata: dict[str, Any] | None = None,
    said_at: datetime | None = None,
    nearby: Nearby | None = None,
    refused: Counter[str] | None = None,
) -> ReconcileCounts:
    """Confirm duplicates, create new memories, retire the ones a new fact replaces.

    `said_at` is when the facts' source turns were said (extraction passes the batch's
    newest turn). A fact then only replaces a memory said no later than it: a re-driven
    old turn never retires a newer fact (see `_keep_as_history`). Direct saves pass
    None: a person replacing a memory by hand always wins. With `refused` (extraction),
    a fact the database refuses is counted there instead of failing the whole call.
    """
    writer = {"actor": actor, "batch_id": batch_id, "source_turn_ids": source_turn_ids}
    run = _Run(session, settings, scope, aliases, now, nearby or {}, said_at, metadata, writer)
    _read_in_order(run, facts)
    if refused is None:
        for fact in facts:
            _reconcile(run, fact)
    elif not _reconciled_at_once(run, facts):
        for fact in facts:
            _reconcile_or_refuse(run, fact, refused)
    return run.counts


def _reconciled_at_once(run: _Run, facts: Sequence[Fact]) -> bool:
    """Every fact written under one savepoint: two statements, where one per fact costs
    two each. False, with nothing written, when the database refused one of them: the
    caller then writes them one by one, each under its own savepoint."""
    try:
        with run.session.begin_nested():
            for fact in facts:
                _reconcile(run, fact)
    except DataError:
        run.counts, run.created = ReconcileCounts(), []
        return False
    return True


def _read_in_order(run: _Run, facts: Sequence[Fact]) -> None:
    """Read every existing memory the facts may find or change, in one statement: those
    the extractor named, those the search found (`nearby`), exact duplicates and the
    memories of the facts' keys. On PostgreSQL they are locked by ascending id: the
    order the usage fold, the embedding fill and the clean-up lock rows in, so no two
    of them can each hold a row the other waits for. The scope lock keeps other writers
    of the scope out, so the set cannot grow before the writes. (SQLite: the write
    transaction already holds the database lock.)"""
    if not facts:
        return
    aliased = (a for f in facts for a in (f.same_as, f.replaces) if a is not None)
    ids = {run.aliases[a] for a in aliased if a in run.aliases}
    ids.update(i for f in facts for i in run.nearby.get(content_hash(f.content), ()))
    alike: list[ColumnElement[bool]] = [
        Memory.content_hash.in_({content_hash(f.content) for f in facts})
    ]
    alike += [
        and_(
            Memory.name_key == key,
            Memory.name_key != written_in(""),  # the partial key index's condition
            Memory.category.in_(key_categories(f.category)),
        )
        for f in facts
        if (key := key_for(f.name, f.content))
    ]
    candidates = (
        select(Memory)
        .where(
            Memory.of(run.scope),
            or_(
                Memory.id.in_(sorted(ids)),
                and_(Memory.status == written_in(MemoryStatus.ACTIVE), or_(*alike)),
            ),
        )
        .order_by(Memory.id)
        .execution_options(populate_existing=True)
    )
    run.read = {m.id: m for m in run.session.scalars(for_update(run.session, candidates))}


def _reconcile_or_refuse(run: _Run, fact: Fact, refused: Counter[str]) -> None:
    """A fact the database refuses to store (DataError: a value outside what a column
    holds) costs that fact alone: its writes roll back to a savepoint, counted as
    `refused_by_database`, and the batch's other facts are written."""
    counts, created = replace(run.counts, kept=list(run.counts.kept)), list(run.created)
    try:
        with run.session.begin_nested():
            _reconcile(run, fact)
    except DataError as exc:
        run.counts, run.created = counts, created
        refused["refused_by_database"] += 1
        # The error's text holds the statement's parameters, the user's words: not logged.
        log.warning("the database refused a proposed fact (%s)", type(exc.orig).__name__)


def _reconcile(run: _Run, fact: Fact) -> None:
    key = key_for(fact.name, fact.content)
    same_key = _same_key(run, key, fact.category)
    same = (
        _in_scope(run, fact.same_as)
        or _same_text(run, fact.content)
        or _near_duplicate(_candidates(run, fact, same_key), fact, run.settings.extraction)
    )
    retired = [m for m in (_in_scope(run, fact.replaces),) if m is not None]
    if fact.single and fact.temporary == "no":
        # The slot holds one value: every other one of its key goes. (A passing state,
        # "short" or a mood, never retires a lasting value unasked.)
        retired += [m for m in same_key if m not in retired]
    # Every row changed below is changed from what was read: lock and re-read it first.
    if same is not None and not _locked_active(run, same):
        same = None
    retired = [m for m in retired if _locked_active(run, m)]
    if same is not None and same in retired:
        if same.content_hash == content_hash(fact.content):
            retired.remove(same)  # said again, not changed: a confirmation
        else:
            same = None  # a near duplicate it updates: a new memory retires it
    if same is not None:
        confirm_memory(run.session, run.settings.memories, same, fact, run.now, **run.writer)
        _add_time(same, fact, run.said_at)
        if key and not same.name_key:  # saved without a key: the next fact finds it by this
            set_content(same, same.content, fact.name)
        run.counts.confirmed += 1
        kept, created = same, False
    else:
        kept, created = _create(run, fact), True
    run.counts.kept.append(kept)
    _retire(run, kept, created, retired)


def _create(run: _Run, fact: Fact) -> Memory:
    detail = {**(run.metadata or {}), **(fact.detail or {})} or None
    memory = create_memory(
        run.session,
        run.settings,
        run.scope,
        fact,
        run.now,
        metadata=detail,
        said_at=run.said_at,
        **run.writer,
    )
    run.counts.created += 1
    run.created.append(memory)
    return memory


def _retire(run: _Run, kept: Memory, created: bool, retired: Sequence[Memory]) -> None:
    """Supersede what `kept` replaces, oldest said first. A memory said after the fact
    stays: a new row is then kept as its history (and retires nothing more)."""
    actor, batch_id = run.writer["actor"], run.writer["batch_id"]
    for old in sorted((m for m in retired if m is not kept), key=said_time):
        if run.said_at is not None and run.said_at < said_time(old):
            if created:
                _keep_as_history(run.session, kept, old, run.now, actor=actor, batch_id=batch_id)
                run.counts.superseded += 1
                return
            continue  # a confirmation still counted as evidence; nothing to retire
        supersede_memory(run.session, old, kept, run.now, actor=actor, batch_id=batch_id)
        run.counts.superseded += 1


def _in_scope(run: _Run, alias: int | None) -> Memory | None:
    """The scope's own active memory behind a prompt alias, if any."""
    memory_id = run.aliases.get(alias) if alias is not None else None
    if memory_id is None:
        return None
    memory = run.session.get(Memory, memory_id)
    scope = run.scope
    if memory is None or memory.agent_id != scope.agent_id or memory.user_id != scope.user_id:
        return None
    return memory if memory.status == MemoryStatus.ACTIVE else None


def _candidates(run: _Run, fact: Fact, same_key: Sequence[Memory]) -> list[Memory]:
    """Where a near duplicate of `fact` may be: its key's memories, the memories the
    caller's search found for it, and those this call created."""
    ids = set(run.nearby.get(content_hash(fact.content), ())) - {m.id for m in same_key}
    found = [run.read[i] for i in sorted(ids) if i in run.read]  # the scope's own
    return [*same_key, *found, *run.counts.kept]


def _same_key(run: _Run, key: str, category: str) -> list[Memory]:
    """The scope's active memories of one key and category, oldest first
    (subjects.same_key_memories, over what was read and created)."""
    if not key:
        return []
    kin = key_categories(category)
    same = (m for m in run.known() if m.name_key == key and m.category in kin)
    return [m for m in same if m.status == MemoryStatus.ACTIVE][:SAME_KEY_LIMIT]


def _same_text(run: _Run, content: str) -> Memory | None:
    """The scope's oldest active memory of exactly this text (store.find_by_hash, over
    what was read and created)."""
    digest = content_hash(content)
    same = (m for m in run.known() if m.content_hash == digest)
    return next((m for m in same if m.status == MemoryStatus.ACTIVE), None)


def _locked_active(run: _Run, memory: Memory) -> bool:
    """Whether `memory`, re-read under its row lock unless this transaction holds it
    already, is still active."""
    if run.holds(memory):
        return memory.status == MemoryStatus.ACTIVE
    return lock_memory(run.session, memory)


def said_time(memory: Memory) -> datetime:
    """When a memory's source was said; rows from before said_at existed use created_at."""
    return memory.said_at or memory.created_at


def _add_time(memory: Memory, fact: Fact, said_at: datetime | None) -> None:
    """A confirmation may date a memory later, and give an episode the day it lacked."""
    if said_at is not None and said_at > said_time(memory):
        memory.said_at = said_at
    if memory.occurred_at is None and fact.occurred_at is not None:
        memory.occurred_at = as_day_start(fact.occurred_at)


def _keep_as_history(
    session: Session,
    older: Memory,
    newer: Memory,
    now: datetime,
    *,
    actor: Actor,
    batch_id: int | None,
) -> None:
    """A fact from turns said before the memory it would replace (a dead-lettered batch
    re-driven late, or turns sent out of order): the newer memory stays active, and the
    older fact is kept as what it is, history the newer one superseded. Dropping it would
    lose what the user said; the timeline is what history is for."""
    older.status = MemoryStatus.SUPERSEDED
    older.superseded_by_id = newer.id
    older.updated_at = now
    record_event(
        session,
        older,
        EventKind.SUPERSEDED,
        actor,
        now,
        before=older.content,
        batch_id=batch_id,
        detail={"superseded_by": newer.id, "reason": "said before it"},
    )


def _near_duplicate(
    candidates: Sequence[Memory], fact: Fact, settings: ExtractionSettings
) -> Memory | None:
    best, best_score = None, settings.near_duplicate_similarity
    for memory in candidates:
        if memory.status != MemoryStatus.ACTIVE or memory.category != fact.category:
            continue
        score = similarity(memory.content, fact.content)
        if score >= best_score:
            best, best_score = memory, score
    return best
