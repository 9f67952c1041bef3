"""Recall's two flows as a chat backend meets them, whoever calls (MemoryClient, the
HTTP routes through it, the agent tools): a ranked list, and the `<memory-context>`
block. Each reads the agent's settings, ranks, and appends a usage row per memory it
returns: no row is locked and no memory changes (maintenance/usage.py folds the rows
into weights and access counts). On PostgreSQL the statements each commit alone, but
for the read of memories and turns where there is a turn to show, one snapshot
(_read); an embedding call, when on, happens before any of it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import NamedTuple

from sqlalchemy.orm import Session

from memoryd import tracing
from memoryd.agents import config as agent_config
from memoryd.memories import profiles
from memoryd.models.db import is_sqlite, session_scope, utcnow
from memoryd.models.keys import Scope, SessionKey
from memoryd.recall import embeddings, inject
from memoryd.recall.as_of import recall_as_of
from memoryd.recall.context import dated
from memoryd.recall.context import render as render_context
from memoryd.recall.embedders import Vectors
from memoryd.recall.hits import Hit
from memoryd.recall.pending import embed_pending, merged, pending_hits
from memoryd.recall.rank import recall
from memoryd.recall.usage import log_retrieval
from memoryd.settings import AgentDefaults, Settings
from memoryd.text import query_term_counts, query_tokens

BlockRules = tuple[Settings, list[str] | None, list[str] | None]
# Turns not yet extracted that a block may show, under their own heading.
PENDING_IN_BLOCK = 5


def ranked(
    base: Settings,
    query: str,
    agent_id: str,
    user_id: str,
    k: int | None = None,
    categories: Sequence[str] | None = None,
    tiers: Sequence[str] | None = None,
    session_id: str | None = None,
    as_of: datetime | None = None,
) -> list[Hit]:
    """Ranked active memories of the scope (and the agent's shared scope) for `query`,
    with the user's matching turns not yet extracted among them, marked pending
    (recall/pending.py). Each memory returned is logged and counted (it feeds promotion
    and weights). With `as_of`, the memories active at that moment instead, read only
    (recall/as_of.py)."""
    if as_of is not None:
        return _ranked_as_of(base, query, Scope(agent_id, user_id), k, categories, tiers, as_of)
    ids = {"agent_id": agent_id, "user_id": user_id, "session_id": session_id}
    with tracing.span(base, "memoryd.recall", **ids, k=k) as span:  # ids, never the query
        # Before any transaction opens: it may be a call to the embedding endpoint.
        vector = embeddings.embed_query(base, query, stress_last_line=True)
        counts = query_term_counts(query)  # tokenised once for every step below
        unextracted = embed_pending(base, Scope(agent_id, user_id), query, vector, list(counts))
        now = utcnow()
        with session_scope(base.storage, autocommit=True) as session:  # see log_retrieval
            # Per-agent memory settings (memoryd/agents): on or off, prefetch, categories.
            settings = agent_config.for_agent(session, base, agent_id)
            categories = agent_config.categories_for(settings.agent, categories)
            if not settings.agent.memory_enabled or categories == []:
                return []
            scope = Scope(agent_id, user_id)
            limit = settings.extraction.prefetch_limit if k is None else k
            ask = _Ask(settings, scope, query, categories, tiers, now, vector, counts, k)
            hits, pending = _read(session, ask, limit, unextracted)
            hits = merged(hits, pending, limit) if pending else hits
            remembered = [h for h in hits if not h.pending]
            log_retrieval(session, settings.recall, scope, remembered, query, session_id, now)
        span.set_attribute("memoryd.hits", len(hits))
    return hits


def context_block(
    base: Settings,
    query: str,
    agent_id: str,
    user_id: str,
    token_budget: int | None = None,
    session_id: str | None = None,
    as_of: datetime | None = None,
) -> str:
    """The `<memory-context>` block of the memories that fit `token_budget` (the
    agent's context_token_budget by default), or "" when nothing relevant fits or the
    agent's injection rules say no (inject.py). With `as_of`, of the memories active at
    that moment, dated as seen from it."""
    if as_of is not None:
        return _block_as_of(base, query, Scope(agent_id, user_id), token_budget, as_of)
    ids = {"agent_id": agent_id, "user_id": user_id, "session_id": session_id}
    with tracing.span(base, "memoryd.context", **ids, token_budget=token_budget) as span:
        block, included = _context_block(base, query, agent_id, user_id, token_budget, session_id)
        span.set_attribute("memoryd.hits", included)
    return block


def _context_block(
    base: Settings,
    query: str,
    agent_id: str,
    user_id: str,
    token_budget: int | None,
    session_id: str | None,
) -> tuple[str, int]:
    """context_block's work: the block, and how many entries it holds (memories and
    pending turns)."""
    counts = query_term_counts(query)
    if not counts:
        return "", 0
    key = SessionKey(agent_id, user_id, session_id) if session_id else None
    rules, vector, unextracted = None, None, None
    if base.embeddings_on:
        # The rules first, outside the writing transaction: a query that gets no
        # block costs no embedding call, and no transaction waits on the model.
        with session_scope(base.storage, readonly=True) as session:
            rules = block_rules(session, base, agent_id, query, key)
        if rules is None:
            return "", 0
        vector = embeddings.embed_query(base, query, stress_last_line=True)
        unextracted = embed_pending(base, Scope(agent_id, user_id), query, vector, list(counts))
    now = utcnow()
    with session_scope(base.storage, autocommit=True) as session:  # see log_retrieval
        rules = rules or block_rules(session, base, agent_id, query, key)
        if rules is None:
            return "", 0
        settings, categories, tiers = rules
        scope = Scope(agent_id, user_id)
        ask = _Ask(settings, scope, query, categories, tiers, now, vector, counts, None)
        hits, pending = _read(session, ask, PENDING_IN_BLOCK, unextracted)
        hits = inject.injectable(settings.agent, hits) + pending
        block, included = _rendered(session, settings.agent, scope, hits, token_budget, now)
        remembered = [h for h in included if not h.pending]
        log_retrieval(session, settings.recall, scope, remembered, query, session_id, now)
    return block, len(included)


def _ranked_as_of(
    base: Settings,
    query: str,
    scope: Scope,
    k: int | None,
    categories: Sequence[str] | None,
    tiers: Sequence[str] | None,
    as_of: datetime,
) -> list[Hit]:
    with session_scope(base.storage, readonly=True) as session:
        settings = agent_config.for_agent(session, base, scope.agent_id)
        categories = agent_config.categories_for(settings.agent, categories)
        if not settings.agent.memory_enabled or categories == []:
            return []
        limit = settings.extraction.prefetch_limit if k is None else k
        return recall_as_of(session, scope, query, as_of, limit, categories, tiers)


def _block_as_of(
    base: Settings, query: str, scope: Scope, token_budget: int | None, as_of: datetime
) -> str:
    """The block as it would have been built at `as_of`: the injection rules, save the
    minimum score (as-of hits score by keywords alone), over the memories active then."""
    if not query_tokens(query):
        return ""
    with session_scope(base.storage, readonly=True) as session:
        rules = block_rules(session, base, scope.agent_id, query, None)
        if rules is None:
            return ""
        settings, categories, tiers = rules
        hits = recall_as_of(
            session, scope, query, as_of, settings.extraction.prefetch_limit, categories, tiers
        )
        if settings.agent.inject_max_items:
            hits = hits[: settings.agent.inject_max_items]
        return _rendered(session, settings.agent, scope, hits, token_budget, as_of)[0]


def _rendered(
    session: Session,
    settings: AgentDefaults,
    scope: Scope,
    hits: list[Hit],
    token_budget: int | None,
    now: datetime,
) -> tuple[str, list[Hit]]:
    """The block of `hits` within the budget (the agent's unless one is given), dates in
    the user's time zone; and the hits it holds."""
    budget = settings.context_token_budget if token_budget is None else token_budget
    zone = profiles.user_timezone(session, scope) if dated(hits) else UTC
    return render_context(hits, budget, now, zone)


class _Ask(NamedTuple):
    """What one recall asks, as _ranked passes it to rank.recall."""

    settings: Settings
    scope: Scope
    query: str
    categories: Sequence[str] | None
    tiers: Sequence[str] | None
    now: datetime
    vector: Vectors | None
    counts: dict[str, int]
    k: int | None


def _read(
    session: Session, ask: _Ask, shown: int, unextracted: bool | None
) -> tuple[list[Hit], list[Hit]]:
    """The memories ranked, and up to `shown` matching turns not yet extracted, as one
    moment saw them. A batch marks its turns done in the transaction that writes their
    memories, but the memories are read in several statements, each its own snapshot on
    PostgreSQL: a batch committing between them could show a turn neither way, or both.
    So where there is a turn to show, the memories and the turns are read again in one
    snapshot; most recalls find none and pay one read of the turns. `unextracted` is
    embed_pending's answer (None: it did not look). A filter asks for memories only."""
    if ask.categories is not None or ask.tiers is not None or unextracted is False:
        return _ranked(session, ask), []
    if unextracted is None and not _pending(session, ask, shown):
        # None to show now: one sent before the recall began is extracted, and its
        # memories are read below.
        return _ranked(session, ask), []
    if is_sqlite(session):  # one transaction: one snapshot already
        return _ranked(session, ask), _pending(session, ask, shown)
    with session_scope(ask.settings.storage, readonly=True) as snapshot:
        return _ranked(snapshot, ask), _pending(snapshot, ask, shown)


def _pending(session: Session, ask: _Ask, shown: int) -> list[Hit]:
    terms = list(ask.counts)
    return pending_hits(session, ask.settings, ask.scope, ask.query, shown, ask.vector, terms)


def _ranked(session: Session, ask: _Ask) -> list[Hit]:
    """recall with the flow's arguments."""
    return recall(
        session,
        ask.settings,
        ask.scope,
        ask.query,
        k=ask.k,
        categories=ask.categories,
        tiers=ask.tiers,
        now=ask.now,
        query_vector=ask.vector,
        counts=ask.counts,
        stress_last_line=True,
    )


def block_rules(
    session: Session, base: Settings, agent_id: str, query: str, key: SessionKey | None
) -> BlockRules | None:
    """The agent's settings, categories and tiers for a context block, or None when
    its memory is off or the injection rules (seed 003 §3.3) say no block."""
    # Per-agent memory settings (memoryd/agents): on or off, prefetch, categories,
    # token budget and injection rules (minimum score, most items, tiers).
    settings = agent_config.for_agent(session, base, agent_id)
    if not settings.agent.memory_enabled:
        return None
    tiers = inject.tiers_for(settings.agent, query)
    if tiers == [] or inject.blocked(session, settings.agent, query, key):
        return None
    return settings, agent_config.categories_for(settings.agent, None), tiers
