"""Recall's keyword list, BM25 (k1 0.6, b 0.75, Lucene's IDF) over every active memory
of the scope, summed by the database from the postings that its triggers keep in
`memory_terms`: one statement, with the same arithmetic on both databases over the
same rows, adding whole numbers, so PostgreSQL and SQLite rank the same data
identically. A scope that search.read_scope reads whole is scored in hand instead, to
the same list (keyword_scan.py). Each term weighs as its caller says (term_weights: how
many times the question says it, and whether a dialogue's last line does)."""

from __future__ import annotations

import functools
import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    ARRAY,
    Float,
    Integer,
    Select,
    String,
    bindparam,
    case,
    cast,
    func,
    literal_column,
    select,
    true,
)
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import Subquery

from memoryd.models.db import is_sqlite
from memoryd.models.keys import Scope
from memoryd.models.tables import Memory, MemoryTerm
from memoryd.recall.search import (
    LIST_LIMIT,
    SCORING_COLUMNS,
    ScopeStats,
    listed,
    narrowing_parameters,
    search_params,
    users_table,
)

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
# Python and both databases then weigh with the same double.
MILLI = 1000.0


def term_weights(
    terms: Sequence[str],
    counts: Mapping[str, int] | None,
    stressed: Collection[str] = (),
    stress: float = 0.0,
) -> list[int]:
    """Each term's weight in thousandths: 1 + REPEATS ln(how many times the question
    says it), from `counts` (text.query_term_counts; 1 each without), plus `stress` for
    the `stressed` terms (a dialogue's last line, RecallSettings)."""
    stressed = frozenset(stressed)
    weights = []
    for term in terms:
        said = REPEATS * math.log(counts.get(term, 1)) if counts is not None else 0.0
        weights.append(round(MILLI * (1.0 + said + (stress if term in stressed else 0.0))))
    return weights


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
    weights: Sequence[int] | None = None,
) -> list[tuple[int, float]]:
    """(memory id, BM25 score) of the scope's memories (without the shared `*` scope's
    when `own_only`) holding any term, each term weighed by its `weights` (term_weights,
    in the terms' order; all alike without), best first, in one statement:
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
    weights = list(weights) if weights is not None else term_weights(terms, None)
    if len(weights) != len(terms):  # PostgreSQL's unnest would pad them with NULLs
        raise ValueError(f"{len(weights)} weights for {len(terms)} terms")
    slots = 0
    if postgres:
        params["weights"] = weights
    else:
        slots = _weighted(params, terms, weights)
    statement = _bm25_statement(postgres, bool(categories), bool(tiers), slots)
    rows = session.connection().execute(statement, params).all()
    if seen is not None:
        seen.update((row.id, row) for row in rows)
    return [(row.id, row.points / POINTS) for row in rows]


POINTS = 1e9  # BM25 points per unit of score, summed as whole numbers


def _weighted(params: dict[str, Any], terms: Sequence[str], weights: Sequence[int]) -> int:
    """SQLite's parameters for the terms that do not weigh MILLI ("weighted_i",
    "weight_i"), which its CASE names (_sqlite_postings); returns the CASE's slots.
    Slots come in powers of two, the spare ones matching nothing (term = NULL): a few
    statement shapes, not one per count of weighted terms, each built and compiled
    once."""
    weighted: list[tuple[str | None, int]] = [
        (t, w) for t, w in zip(terms, weights, strict=True) if w != MILLI
    ]
    slots = 1 << (len(weighted) - 1).bit_length() if weighted else 0
    weighted += [(None, int(MILLI))] * (slots - len(weighted))
    for i, (term, weight) in enumerate(weighted):
        params[f"weighted_{i}"], params[f"weight_{i}"] = term, weight
    return slots


@functools.cache
def _bm25_statement(postgres: bool, categories: bool, tiers: bool, slots: int) -> Select[Any]:
    """bm25_ranked's statement, built once per shape (building it took longer than the
    database takes to run it): the scope's best memories by BM25, with their
    SCORING_COLUMNS and score in points."""
    postings = _postings(postgres, categories, tiers, slots)
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


# What a posting carries to the formula, besides its term's weight.
POSTING_COLUMNS: tuple[Any, ...] = (
    MemoryTerm.memory_id,
    MemoryTerm.term,
    MemoryTerm.tf,
    MemoryTerm.search_length,
)


def _postings(postgres: bool, categories: bool, tiers: bool, slots: int) -> Subquery:
    """The scope's postings of the query's terms (POSTING_COLUMNS and the term's
    weight), of memories in those categories and tiers when they are asked for."""
    if postgres:
        return _pg_postings(categories, tiers)
    return _sqlite_postings(categories, tiers, slots)


def _narrowed(matching: Select[Any], categories: bool, tiers: bool) -> Select[Any]:
    """`matching` postings joined to their memories when categories or tiers are asked
    for; alone otherwise (read from the index that holds them)."""
    if not (categories or tiers):
        return matching
    return matching.join(Memory, Memory.id == MemoryTerm.memory_id).where(
        *narrowing_parameters(categories, tiers)
    )


def _sqlite_postings(categories: bool, tiers: bool, slots: int) -> Subquery:
    """SQLite: the terms as an IN list; most weigh MILLI, the others are named in a CASE
    of `slots` slots. Joined to the weights as a table (json_each), the postings' lookup
    took three times as long."""
    weight: ColumnElement[Any] = literal_column(str(int(MILLI)), Integer)
    if slots:
        named = [
            (
                MemoryTerm.term == bindparam(f"weighted_{i}"),
                bindparam(f"weight_{i}", type_=Integer),
            )
            for i in range(slots)
        ]
        weight = case(*named, else_=weight)
    matching = select(*POSTING_COLUMNS, weight.label("weight")).where(
        MemoryTerm.agent_id == bindparam("agent"),
        MemoryTerm.user_id.in_(bindparam("users", expanding=True)),
        listed(MemoryTerm.term, "terms", postgres=False),
    )
    return _narrowed(matching, categories, tiers).subquery("postings")


def _pg_postings(categories: bool, tiers: bool) -> Subquery:
    """PostgreSQL: each term of the array, with its weight from the array beside it,
    looked up in the index by itself, per readable user: a LATERAL lookup, kept as one
    by OFFSET 0 (else the planner pulls it up into a join). With `term = ANY(array)`,
    or a plain join, a planner without statistics (a freshly loaded store, autovacuum
    off) read every posting of the scope and filtered them: 100-400 ms for a user of
    9,000 postings."""
    terms = func.unnest(
        bindparam("terms", type_=ARRAY(String)), bindparam("weights", type_=ARRAY(Integer))
    )
    asked = terms.table_valued("term", "weight").render_derived(name="asked")
    who = users_table()
    matching = select(*POSTING_COLUMNS).where(
        MemoryTerm.agent_id == bindparam("agent"),
        MemoryTerm.user_id == who.c.user_id,
        MemoryTerm.term == asked.c.term,
    )
    found = _narrowed(matching, categories, tiers).offset(literal_column("0")).lateral("found")
    return (
        select(found, asked.c.weight)
        .select_from(asked)
        .join(who, true())
        .join(found, true())
        .subquery("postings")
    )
