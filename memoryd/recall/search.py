"""Recall's keyword list over every active memory of the scope, and what the lexical
lists share (the scope's statistics, the columns re-scoring needs). The trigram list is
in trigrams.py.

- Keyword: BM25 (k1 0.6, b 0.75, Lucene's IDF) over the scope, summed by the database
  from the postings that its triggers keep in `memory_terms`. Both databases run the
  same statement over the same rows and add whole numbers (see bm25_ranked), so
  PostgreSQL and SQLite rank the same data identically. A scope that read_scope reads
  whole is scored in hand instead, to the same list (keyword_scan.py).

User text never reaches a query syntax raw: terms are letters and digits only
(text.search_tokens), and every value is a bound parameter.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ARRAY,
    Executable,
    Float,
    Integer,
    Select,
    String,
    any_,
    bindparam,
    case,
    cast,
    func,
    literal_column,
    select,
    true,
)
from sqlalchemy.orm import InstrumentedAttribute, Session
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import Subquery, TableValuedAlias

from memoryd.memo import RecentMemo
from memoryd.models.base import readable_users
from memoryd.models.db import is_sqlite
from memoryd.models.keys import Scope
from memoryd.models.tables import Memory, MemoryStatus, MemoryTerm

# Memories run from a sentence to a long note: a term's second occurrence says little
# more than its first, and a long note holds more, it does not pad. Until subject keys
# (0013) a memory without a name repeated its text as its name, which ranks as k1 0.6
# on the text once. Scoring it once, k1 0.8 was chosen while strength weighed
# 0.15 in re-scoring; with strength a tie-breaker (0.05), bench/quality.py's hit@5 over
# k1 0.5 / 0.6 / 0.8 (RealMem's 1,415 questions, MADial-Bench zh, en) is, without
# vectors, 0.673 / 0.676 / 0.673, 0.812 / 0.819 / 0.825, 0.794 for all three; with the
# local MiniLM vectors, 0.723 / 0.721 / 0.714, 0.656 / 0.656 / 0.650, 0.900 / 0.900 /
# 0.887. At 0.8 RealMem with vectors was 0.6 points under its figure before subject
# keys (8 of its questions, most between 5th and 6th place). A lower k1 also holds a
# long note's length less against it next to shorter memories sharing its words.
K1 = 0.6
B = 0.75
# A term the question says again is more what it asks about (a pasted dialogue comes
# back to its topic): its part weighs 1 + 0.5 ln(how many times), one ln(2)/2 more for
# a second mention. bench/quality.py hit@5 without a model (RealMem, MADial zh, en) at
# 0 / 0.25 / 0.4 / 0.5 / 0.75: 0.686 / 0.686 / 0.689 / 0.689 / 0.689, 0.819 / 0.825 /
# 0.819 / 0.825 / 0.825, 0.794 / 0.812 / 0.806 / 0.812 / 0.812 (weights as unrounded
# fractions; in thousandths, 0.5 gave RealMem 0.691 in the next run). Recall leaves it out
# when a model's nearest vectors are fused too (rank.py): with use-multilingual, 0 /
# 0.25 / 0.5 gave 0.702 / 0.702 / 0.702, 0.838 / 0.831 / 0.812, 0.856 / 0.850 / 0.844.
REPEATS = 0.5
# Weights travel in thousandths, whole numbers, each divided by MILLI where it is used:
# every database reads the same value (SQLite's JSON reads a fraction its own way).
MILLI = 1000.0
LIST_LIMIT = 50
# Scopes up to this size are read whole and their trigram similarity computed row by
# row; a larger one finds its trigram candidates through the postings (trigrams.py).
# Scoring a row costs about 5 µs, 30 µs the first time its text is met
# (trigrams.TrigramShare): a larger scope would read and score rows that the postings
# rule out at no cost.
SCAN_LIMIT = 200
# Above this size a scope reuses its BM25 statistics (and recall.embeddings its vector
# stamp) for a while: counting thousands of rows per query costs more than the ranking
# it informs. Reused from 200 on, the statistics of a scope still filling (RealMem's
# facts loaded a few milliseconds apart in bench/quality.py) lagged enough to cost
# 0.7 points of hit@5 with embeddings on.
LARGE_SCOPE = 1000
# What re-scoring (rank.py) needs of a candidate, read by the queries that find it.
SCORING_COLUMNS = (
    Memory.id,
    Memory.tier,
    Memory.weight,
    Memory.weight_at,
    Memory.updated_at,
    Memory.confidence,
    Memory.name_key,
    Memory.category,
    Memory.occurred_at,
)


# How long a LARGE_SCOPE's statistics are reused: a few seconds of new or retired
# memories move a large scope's IDF and average length by a hair.
STATS_REUSE_SECONDS = 30.0


# Written out as the trigram index's expression, so PostgreSQL can match the two.
BODY = literal_column("(memories.name || ' ' || memories.content)", String)


def narrowing(
    categories: Sequence[str] | None, tiers: Sequence[str] | None
) -> list[ColumnElement[bool]]:
    """The caller's conditions beyond an active memory of the scope."""
    where: list[ColumnElement[bool]] = []
    if categories:
        where.append(Memory.category.in_(list(categories)))
    if tiers:
        where.append(Memory.tier.in_(list(tiers)))
    return where


@dataclass(frozen=True)
class ScopeStats:
    docs: int  # active memories the query may return
    total_length: int  # their terms, all together

    @property
    def average(self) -> float:
        """Terms per memory, at least one (BM25's average document length)."""
        return max(self.total_length / self.docs, 1.0) if self.docs else 1.0


_recent_stats: RecentMemo[ScopeStats] = RecentMemo(STATS_REUSE_SECONDS)


def search_params(
    scope: Scope, categories: Sequence[str] | None, tiers: Sequence[str] | None
) -> dict[str, Any]:
    """The values of a search's bound parameters: the scope's readable users, and the
    categories and tiers asked for. Statements over them (filters) are built once."""
    return {
        "agent": scope.agent_id,
        "users": readable_users(scope),
        "categories": list(categories or ()),
        "tiers": list(tiers or ()),
    }


@functools.cache
def filters(categories: bool, tiers: bool) -> tuple[ColumnElement[bool], ...]:
    """Which memories a search may return (active ones of the scope, of those categories
    and tiers), with search_params' values bound at execution: built once per shape
    (with or without categories and tiers), as the statements over them are. Building a
    recall's statements anew each time cost about 0.2 ms of it."""
    return (
        Memory.agent_id == bindparam("agent"),
        Memory.user_id.in_(bindparam("users", expanding=True)),
        Memory.status == MemoryStatus.ACTIVE,
        *narrowing_parameters(categories, tiers),
    )


def shape(params: Mapping[str, Any]) -> tuple[bool, bool]:
    """The shape of search_params' `params` (whether categories, whether tiers), which
    picks the statement built once for it: filters(*shape(params))."""
    return bool(params["categories"]), bool(params["tiers"])


@functools.cache
def _counted(categories: bool, tiers: bool) -> Executable:
    counted = select(func.count(), func.coalesce(func.sum(Memory.search_length), 0))
    return counted.where(*filters(categories, tiers))


@functools.cache
def _in_scope(categories: bool, tiers: bool) -> Executable:
    # search_text too: a scope read whole is also BM25-scored in hand (keyword_scan.py).
    read = (Memory.search_length, Memory.search_text, BODY.label("body"))
    in_scope = select(*SCORING_COLUMNS, *read)
    return in_scope.where(*filters(categories, tiers)).limit(SCAN_LIMIT + 1)


def scope_stats(session: Session, params: Mapping[str, Any]) -> ScopeStats:
    """The count and total length of the memories search_params' `params` select."""
    statement = _counted(*shape(params))
    docs, total_length = session.connection().execute(statement, params).one()
    return ScopeStats(int(docs), int(total_length))


def reused_stats(session: Session, params: Mapping[str, Any], key: Hashable) -> ScopeStats:
    """scope_stats, reused for STATS_REUSE_SECONDS when the scope holds more than
    LARGE_SCOPE memories: counting a scope of thousands costs more than the search it
    informs. A smaller scope is counted each time, so one that was empty a moment ago is
    searched as it is now."""
    stats = _recent_stats.get(key)
    if stats is None:
        stats = scope_stats(session, params)
        if stats.docs > LARGE_SCOPE:
            _recent_stats.put(key, stats)
    return stats


def read_scope(
    session: Session, params: Mapping[str, Any], key: Hashable
) -> tuple[ScopeStats, Sequence[Any] | None]:
    """The statistics of the memories search_params' `params` select, and, when they are
    at most SCAN_LIMIT, the memories themselves (SCORING_COLUMNS and body): one read then
    serves BM25's statistics, trigram scoring and re-scoring. `key` names the database,
    scope and filters. A scope found larger than SCAN_LIMIT is only counted for a while
    after (a large one's count reused, see reused_stats): scopes grow far more than they
    shrink, and the other path is right for a small scope too, only slower."""
    if _recent_stats.get(("larger", key)) is not None:
        return reused_stats(session, params, key), None
    statement = _in_scope(*shape(params))
    rows = session.connection().execute(statement, params).all()
    if len(rows) <= SCAN_LIMIT:
        return ScopeStats(len(rows), sum(r.search_length for r in rows)), rows
    stats = reused_stats(session, params, key)
    _recent_stats.put(("larger", key), stats)
    return stats, None


def term_weights(terms: Sequence[str], counts: Mapping[str, int] | None) -> list[int]:
    """Each term's weight in thousandths (REPEATS), from how many times the question
    says it (`counts`, text.query_term_counts); 1,000 each without counts."""
    if counts is None:
        return [int(MILLI)] * len(terms)
    return [round(MILLI * (1.0 + REPEATS * math.log(counts.get(t, 1)))) for t in terms]


def bm25_ranked(
    session: Session,
    scope: Scope,
    categories: Sequence[str] | None,
    tiers: Sequence[str] | None,
    terms: list[str],
    stats: ScopeStats,
    limit: int = LIST_LIMIT,
    seen: dict[int, Any] | None = None,
    own_only: bool = False,
    counts: Mapping[str, int] | None = None,
) -> list[tuple[int, float]]:
    """(memory id, BM25 score) of the scope's memories (without the shared `*` scope's
    when `own_only`) holding any term, each term weighed by how many times the question
    says it (`counts`, term_weights; all alike without), best first, in one statement:
    the database sums the postings and returns the best memories with their
    SCORING_COLUMNS, which `seen` collects. Postings exist for active memories only
    and carry what the formula needs, so without categories or tiers to match they are
    read alone, from the index that holds them; with them, they are joined to their
    memories.

    Each term's part is floored to whole nano-points before the sum: integers add up
    exactly in any order, so both databases compute the same scores from the same rows
    (their floating-point sums could differ in the last bit with the order of rows)."""
    if not terms or not stats.docs:
        return []
    params = search_params(scope, categories, tiers)
    if own_only:
        params["users"] = [scope.user_id]
    params.update(terms=terms, docs=float(stats.docs), average=stats.average, limit=limit)
    postgres = not is_sqlite(session)
    weights = term_weights(terms, counts)
    if postgres:
        params["weights"] = weights
    else:  # unescaped: SQLite need not decode a character's escape (or surrogate pair)
        params["weights"] = json.dumps(dict(zip(terms, weights, strict=True)), ensure_ascii=False)
    statement = _bm25_statement(postgres, bool(categories), bool(tiers))
    rows = session.connection().execute(statement, params).all()
    if seen is not None:
        seen.update((row.id, row) for row in rows)
    return [(row.id, row.points / POINTS) for row in rows]


POINTS = 1e9  # BM25 points per unit of score, summed as whole numbers


def listed(column: InstrumentedAttribute[str], name: str, postgres: bool) -> ColumnElement[bool]:
    """`column` is one of the values of the list parameter `name`. On PostgreSQL one
    array parameter: the statement's text is the same whatever the list's length, so
    psycopg prepares it once and the server stops planning it (a statement per length
    was planned at each run: about 1 ms of a recall's prefix search, and its 16
    prefixes took more parameters than psycopg prepares). SQLite plans in microseconds
    and has no arrays: an IN list, expanded."""
    if postgres:
        return column == any_(bindparam(name, type_=ARRAY(String)))
    return column.in_(bindparam(name, expanding=True))


def users_table() -> TableValuedAlias:
    """PostgreSQL: the "users" array parameter as rows, so that each user's postings are
    looked up by equality on the postings' key (agent, user, term)."""
    users = func.unnest(bindparam("users", type_=ARRAY(String)))
    return users.table_valued("user_id").render_derived(name="who")


@functools.cache
def _bm25_statement(postgres: bool, categories: bool, tiers: bool) -> Select[Any]:
    """bm25_ranked's statement, built once per shape (building it took longer than the
    database takes to run it): the scope's best memories by BM25, with their
    SCORING_COLUMNS and score in points."""
    postings = _postings(postgres, categories, tiers)
    # Each term's document count beside its postings, by a window rather than a join
    # of per-term counts: no join order for a planner to get wrong (without statistics
    # PostgreSQL nested-looped the counts once per posting: 300 ms for 3,000 postings).
    with_df = select(
        postings.c.memory_id,
        postings.c.tf,
        postings.c.search_length,
        postings.c.weight,
        func.count().over(partition_by=postings.c.term).label("n"),
    ).subquery("with_df")
    # Every operand a double, so both databases do the same floating-point arithmetic.
    columns = (with_df.c.n, with_df.c.tf, with_df.c.search_length, with_df.c.weight)
    n, tf, length, milli = (cast(c, Float) for c in columns)
    # A large scope's count is reused for a while (reused_stats): never below a term's
    # own count, or a term held by more memories than were counted would weigh less
    # than nothing.
    counted = bindparam("docs", type_=Float)
    docs = case((n > counted, n), else_=counted)
    idf = func.ln(1.0 + (docs - n + 0.5) / (n + 0.5), type_=Float)
    norm = K1 * (1.0 - B + B * length / bindparam("average", type_=Float))
    # Operations in keyword_scan._part's order: the same double in Python.
    weighted = idf * (milli / MILLI)
    part = func.floor(weighted * tf * (K1 + 1.0) / (tf + norm) * POINTS, type_=Float)
    points = func.sum(part, type_=Float).label("points")
    best = (
        select(with_df.c.memory_id, points)
        .group_by(with_df.c.memory_id)
        .order_by(points.desc(), with_df.c.memory_id.desc())
        .limit(bindparam("limit"))
        .subquery("best")
    )  # limited before the join: only the best memories are read
    return (
        select(*SCORING_COLUMNS, best.c.points)
        .join(best, best.c.memory_id == Memory.id)
        .order_by(best.c.points.desc(), Memory.id.desc())
    )


def _postings(postgres: bool, categories: bool, tiers: bool) -> Subquery:
    """The scope's postings of the query's terms (memory_id, term, tf, search_length,
    and the term's weight), of memories in those categories and tiers when they are
    asked for."""
    columns: tuple[Any, ...] = (
        MemoryTerm.memory_id,
        MemoryTerm.term,
        MemoryTerm.tf,
        MemoryTerm.search_length,
    )

    def narrowed(matching: Select[Any]) -> Select[Any]:
        if not (categories or tiers):
            return matching
        return matching.join(Memory, Memory.id == MemoryTerm.memory_id).where(
            *narrowing_parameters(categories, tiers)
        )

    if not postgres:
        # Each term's weight from the JSON object {term: weight} of the "weights" parameter.
        weights = func.json_each(bindparam("weights")).table_valued("key", "value").alias("asked")
        matching = (
            select(*columns, weights.c.value.label("weight"))
            .join(weights, weights.c.key == MemoryTerm.term)
            .where(
                MemoryTerm.agent_id == bindparam("agent"),
                MemoryTerm.user_id.in_(bindparam("users", expanding=True)),
                listed(MemoryTerm.term, "terms", postgres),
            )
        )
        return narrowed(matching).subquery("postings")
    # Each term of the array looked up in the index by itself, per readable user: a
    # LATERAL lookup, kept as one by OFFSET 0 (else the planner pulls it up into a
    # join). With `term = ANY(array)`, or a plain join, a planner without statistics (a
    # freshly loaded store, autovacuum off) read every posting of the scope and
    # filtered them: 100-400 ms for a user of 9,000 postings.
    terms = func.unnest(
        bindparam("terms", type_=ARRAY(String)), bindparam("weights", type_=ARRAY(Integer))
    )
    asked = terms.table_valued("term", "weight").render_derived(name="asked")
    who = users_table()
    matching = select(*columns).where(
        MemoryTerm.agent_id == bindparam("agent"),
        MemoryTerm.user_id == who.c.user_id,
        MemoryTerm.term == asked.c.term,
    )
    found = narrowed(matching).offset(literal_column("0")).lateral("found")
    return (
        select(found, asked.c.weight)
        .select_from(asked)
        .join(who, true())
        .join(found, true())
        .subquery("postings")
    )


def narrowing_parameters(categories: bool, tiers: bool) -> list[ColumnElement[bool]]:
    """narrowing's conditions for statements built once: the values are the bind
    parameters "categories" and "tiers"."""
    where: list[ColumnElement[bool]] = []
    if categories:
        where.append(Memory.category.in_(bindparam("categories", expanding=True)))
    if tiers:
        where.append(Memory.tier.in_(bindparam("tiers", expanding=True)))
    return where
