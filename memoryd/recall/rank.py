"""Hybrid recall: BM25 keywords, trigram similarity and (when on) embeddings, each over
the whole scope, fused by weighted reciprocal rank, then re-scored by strength, recency
and confidence.

Every query reads one scope: the user's own memories plus the agent's shared `*` scope.
Its reads, and those of search.py and bm25.py, run on the session's connection: plain
rows, without the ORM's work per statement (about 0.2 ms each; recall has no pending
objects to flush).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Executable, bindparam, select
from sqlalchemy.orm import Session

from memoryd.memories.synonyms import key_asked
from memoryd.memories.weights import MAX_WEIGHT, effective_weight
from memoryd.models.base import readable_users
from memoryd.models.db import is_sqlite
from memoryd.models.keys import Scope
from memoryd.models.tables import Memory, MemoryStatus
from memoryd.recall.bm25 import bm25_ranked, term_weights
from memoryd.recall.hits import Hit, ScoreParts, hits_read
from memoryd.recall.intent import (
    Intent,
    asks_about_now,
    intent_of,
    key_rows,
    newest_value_first,
)
from memoryd.recall.keyword_scan import bm25_scanned
from memoryd.recall.rerank import reranked, reranker_for
from memoryd.recall.scope_vectors import closest, counted_stamp
from memoryd.recall.search import (
    LIST_LIMIT,
    SCORING_COLUMNS,
    Scored,
    narrowing_parameters,
    newest_in_scope,
    of_ids,
    read_scope,
    search_params,
    shape,
)
from memoryd.recall.spread import spread_by_conversation
from memoryd.recall.trigrams import trigram_ranked
from memoryd.settings import RecallSettings, Settings
from memoryd.text import last_line_terms, query_term_counts

EMBEDDING_POOL = 200  # nearest vectors read when category/tier filters apply


@functools.cache
def _contents(postgres: bool) -> Executable:
    """What a reranker reads of the fused list's head. Recall's statements are built once
    (per shape and database) and read as plain rows: building them and loading ORM
    objects each time cost about 1.3 ms a recall on top of the queries."""
    return select(Memory.id, Memory.content).where(of_ids(postgres))


def recall(
    session: Session,
    settings: Settings,
    scope: Scope,
    query: str,
    *,
    k: int | None = None,
    categories: Sequence[str] | None = None,
    tiers: Sequence[str] | None = None,
    now: datetime,
    query_vector: NDArray[np.float32] | None = None,
    counts: dict[str, int] | None = None,
    spread: bool = True,
    stress_last_line: bool = False,
) -> list[Hit]:
    """The k most useful active memories for `query`. With a query that has no search
    terms, the strongest and most recent ones; otherwise only memories that some list
    matched. Reads only: no row is locked. `counts` are the query's term counts
    (text.query_term_counts) when the caller has them: a long query's tokenising costs
    about as much as a small scope's keyword search. `spread` False ranks by score alone,
    not spread over conversations (spread.py). `stress_last_line` (a recall's question,
    not extraction's turns) weighs a dialogue's last line more in the keywords, without
    a vector (_term_weights)."""
    k = settings.extraction.prefetch_limit if k is None else k
    if k <= 0:
        return []
    counts = query_term_counts(query) if counts is None else counts
    stressed = stress_last_line and query_vector is None
    last_terms = last_line_terms(query) if stressed else frozenset()
    search = _Search(scope, categories, tiers, counts, last_terms)
    lists = _ranked_lists(session, settings, search, query, query_vector)
    by_id = {row.id: row for row in _candidate_rows(session, search, lists, k)}
    lists.rank_nearest(by_id)
    matched_only = bool(search.terms or lists.nearest)
    asked = _Asked(frozenset(search.terms), intent_of(query))
    top = _scored(settings, lists, by_id, now, matched_only, asked)
    top = _ordered(session, settings.recall, query, top, by_id, k, spread, bool(search.terms))
    return _hits(session, lists, top[:k])


def _candidate_rows(session: Session, search: _Search, lists: _Lists, k: int) -> list[Any]:
    """The candidates' SCORING_COLUMNS: what the lists matched and the memories of the
    subject keys the question names; with nothing to match on, the most recent ones."""
    if not (search.terms or lists.nearest):
        return _recent_rows(session, search, k)
    rows = _matched_rows(session, search, lists)
    found = {row.id for row in rows}
    keyed = key_rows(session, search.params, search.terms, lists.whole)
    return rows + [r for r in keyed if r.id not in found]


def _ordered(
    session: Session,
    settings: RecallSettings,
    query: str,
    top: Scored,
    by_id: dict[int, Any],
    k: int,
    spread: bool,
    searched: bool,
) -> Scored:
    """The scored candidates in the order recall returns them: spread over
    conversations, the head reranked when a reranker is on and the query has terms,
    and a subject key's newest value first for a question about the present."""
    reranker = reranker_for(settings) if settings.rerank != "off" else None
    head = max(k, settings.rerank_top_n if reranker else 0)
    if spread:
        top = spread_by_conversation(top, by_id, settings.rank_spread, head)
    if reranker is not None and searched:
        contents = session.connection().execute(
            _contents(not is_sqlite(session)),
            {"ids": [mid for _, mid, _ in top[: settings.rerank_top_n]]},
        )
        top = reranked(settings, reranker, query, top, {mid: text for mid, text in contents})
    if asks_about_now(query):
        top = newest_value_first(top, by_id)
    return top


class _Asked(NamedTuple):
    """What a question asks beyond its matches: its terms (for keys) and its intent."""

    terms: frozenset[str]
    intent: Intent


class _Search:
    """What one recall searches: the scope, its filters, the query's terms."""

    def __init__(
        self,
        scope: Scope,
        categories: Sequence[str] | None,
        tiers: Sequence[str] | None,
        counts: dict[str, int],
        last_terms: frozenset[str],
    ) -> None:
        self.scope = scope
        self.categories = categories
        self.tiers = tiers
        self.counts = counts  # each search term, and how many times the query says it
        self.terms = list(counts)
        self.last_terms = last_terms  # a dialogue's last line's, to stress
        self.params = search_params(scope, categories, tiers)


class _Lists:
    """Each list's ranks, and the candidates' SCORING_COLUMNS its queries read (`seen`)."""

    def __init__(self, settings: RecallSettings, whole: Sequence[Any] | None) -> None:
        self.whole = whole  # the scope's rows, when it was small enough to read whole
        self.seen: dict[int, Any] = {row.id: row for row in whole or ()}
        self.keyword: list[tuple[int, float]] = []
        self.trigram: list[tuple[int, float]] = []
        self.nearest: list[tuple[int, float]] = []
        self.weighted: list[tuple[float, dict[int, int]]] = []
        self.closeness: dict[int, float] = {}
        self.settings = settings

    def rank(self, with_vectors: bool) -> None:
        settings = self.settings
        self.weighted = [
            (settings.fusion_weight_keyword, _ranks(mid for mid, _ in self.keyword)),
            (settings.fusion_weight_trigram, _ranks(mid for mid, _ in self.trigram)),
        ]
        if with_vectors:
            self.weighted.append((settings.fusion_weight_embedding, {}))

    def rank_nearest(self, by_id: dict[int, Any]) -> None:
        """The embedding list ranks the nearest vectors that passed the filters."""
        self.closeness = {mid: c for mid, c in self.nearest if mid in by_id}
        if len(self.weighted) == 3:
            self.weighted[-1][1].update(_ranks(list(self.closeness)[:LIST_LIMIT]))


def _ranks(ids: Any) -> dict[int, int]:
    return {mid: rank for rank, mid in enumerate(ids, 1)}


def _ranked_lists(
    session: Session,
    settings: Settings,
    search: _Search,
    query: str,
    query_vector: NDArray[np.float32] | None,
) -> _Lists:
    scope, categories, tiers = search.scope, search.categories, search.tiers
    stats_key = (
        settings.storage.resolved_database_url,
        scope.agent_id,
        scope.user_id,
        tuple(categories or ()),
        tuple(tiers or ()),
    )
    stats, scope_rows = read_scope(session, search.params, stats_key)
    # Candidates' SCORING_COLUMNS, read by the lists' queries (a small scope: all of it).
    lists = _Lists(settings.recall, scope_rows)
    weights = _term_weights(settings.recall, search, with_vectors=query_vector is not None)
    if scope_rows is None:
        lists.keyword = bm25_ranked(
            session, scope, categories, tiers, search.terms, stats, seen=lists.seen, weights=weights
        )
    else:  # the same list, without a statement
        lists.keyword = bm25_scanned(scope_rows, search.terms, stats, weights)
    lists.trigram = trigram_ranked(
        session,
        scope,
        categories,
        tiers,
        query,
        settings.recall.recall_min_similarity,
        stats,
        seen=lists.seen,
        scope_rows=scope_rows,
    )
    if query_vector is not None:
        # The vectors are the scope's active memories: with no other filter the list's
        # own length is enough; with one, a deeper pool leaves that many after it.
        pool = EMBEDDING_POOL if categories or tiers else LIST_LIMIT
        # A scope read whole, unfiltered, tells the vectors' stamp without a statement.
        whole = scope_rows is not None and not categories and not tiers
        counted = counted_stamp(scope_rows or ()) if whole else None
        lists.nearest = closest(session, settings, scope, query_vector, pool, counted)
    lists.rank(with_vectors=query_vector is not None)
    return lists


def _term_weights(settings: RecallSettings, search: _Search, with_vectors: bool) -> list[int]:
    """The keyword list's term weights. In the keywords alone, a term said again and one
    of a dialogue's last line (what the answer speaks to) weigh more; beside a model's
    list every term weighs alike: the repeats cost MADial hit@5 there (bm25.REPEATS), and
    the last line, which the vector already leans on, cost English 1.3 points
    (RecallSettings.keyword_last_line_weight)."""
    if with_vectors:
        return term_weights(search.terms, None)
    stress = settings.keyword_last_line_weight
    return term_weights(search.terms, search.counts, search.last_terms, stress)


def _matched_rows(session: Session, search: _Search, lists: _Lists) -> list[Any]:
    """Every list's candidates, with their SCORING_COLUMNS: as the lists' queries read
    them, and the nearest vectors' (ids from the scope's cache) read here by id."""
    ids = {mid for _, ranks in lists.weighted for mid in ranks}
    ids |= {mid for mid, _ in lists.nearest}
    rows = [lists.seen[mid] for mid in ids if mid in lists.seen]
    unread = ids - lists.seen.keys()
    if unread:
        # Found by id, the scope checked here: with the scope in the query too,
        # PostgreSQL's generic plan for it (prepared after a few runs) walks the
        # whole scope instead. The check still matters: the vectors come from a
        # cache, which a database restored under it would make stale.
        users = readable_users(search.scope)
        read = _unread(*shape(search.params), postgres=not is_sqlite(session))
        rows += [
            row
            for row in session.connection().execute(read, {**search.params, "ids": list(unread)})
            if row.agent_id == search.scope.agent_id and row.user_id in users
        ]
    return rows


@functools.cache
def _unread(categories: bool, tiers: bool, postgres: bool) -> Executable:
    """The candidates that no list read (the nearest vectors), by id, of those categories
    and tiers: built once per shape and database."""
    unread = select(*SCORING_COLUMNS, Memory.agent_id, Memory.user_id)
    active = (of_ids(postgres), Memory.status == MemoryStatus.ACTIVE)
    return unread.where(*active, *narrowing_parameters(categories, tiers))


def _recent_rows(session: Session, search: _Search, k: int) -> list[Any]:
    recent = _recent(*shape(search.params))
    limit = max(k * 4, LIST_LIMIT)
    return list(session.connection().execute(recent, {**search.params, "limit": limit}).all())


@functools.cache
def _recent(categories: bool, tiers: bool) -> Executable:
    """The most recently updated memories a search may return, built once per shape."""
    return newest_in_scope(select(*SCORING_COLUMNS), categories, tiers, bindparam("limit"))


def _scored(
    settings: Settings,
    lists: _Lists,
    by_id: dict[int, Any],
    now: datetime,
    matched_only: bool,
    asked: _Asked,
) -> Scored:
    """(score, id, signals) of the candidates, best first: the fused list ranks,
    re-scored by strength, recency, confidence and whether the question (its `terms`)
    names the memory's subject key. Plain tuples: models are built only
    for the hits returned."""
    rrf_k = settings.recall.fusion_rrf_k
    best_possible = sum(weight for weight, _ in lists.weighted) / (rrf_k + 1)
    scored: Scored = []
    for mid, row in by_id.items():
        fused = sum(w / (rrf_k + ranks[mid]) for w, ranks in lists.weighted if mid in ranks)
        key = bool(row.name_key) and key_asked(row.name_key, asked.terms)
        if matched_only and not fused and not key:
            continue
        age_days = max((now - row.updated_at).total_seconds(), 0) / 86_400
        signals = {
            "fused": round(fused / best_possible, 6) if best_possible else 0.0,
            "strength": min(effective_weight(row, now, settings.memories) / MAX_WEIGHT * 2, 1.0),
            "recency": 0.5 ** (age_days / settings.recall.recency_half_life_days),
            "confidence": row.confidence,
            "key": 1.0 if key else 0.0,
            "intent": 1.0 if asked.intent and asked.intent.wants(row) else 0.0,
        }
        score = (
            settings.recall.rank_weight_match * signals["fused"]
            + settings.recall.rank_weight_strength * signals["strength"]
            + settings.recall.rank_weight_recency * signals["recency"]
            + settings.recall.rank_weight_confidence * signals["confidence"]
            + settings.recall.rank_weight_key * signals["key"]
            + settings.recall.rank_weight_intent * signals["intent"]
        )
        scored.append((round(score, 6), mid, signals))
    scored.sort(key=lambda item: (-item[0], -item[1]))
    return scored


def _hits(
    session: Session,
    lists: _Lists,
    top: Scored,
) -> list[Hit]:
    """The top memories as Hits, their whole rows read."""
    if not top:
        return []
    hit_fields = hits_read(not is_sqlite(session))
    loaded = session.connection().execute(hit_fields, {"ids": [mid for _, mid, _ in top]})
    memories = {row.id: row for row in loaded}
    bm25, similarity = dict(lists.keyword), dict(lists.trigram)
    hits = []
    for score, mid, signals in top:
        memory = memories.get(mid)
        if memory is None:  # erased since it was ranked
            continue
        parts = ScoreParts(
            keyword_rank=lists.weighted[0][1].get(mid),
            bm25=round(bm25[mid], 4) if mid in bm25 else None,
            similarity=round(similarity.get(mid, 0.0), 4),
            embedding=round(lists.closeness[mid], 4) if mid in lists.closeness else None,
            **signals,
        )
        hits.append(Hit(**memory._mapping, score=score, parts=parts))
    return hits
