"""The keyword list of a small scope, scored in Python over the rows recall has already
read (search.read_scope), instead of by bm25.bm25_ranked's statement.

Same formula, same constants, same operations in the same order, each term's part
floored to whole points before the sum, and the same ties (best points, then newest
id): the list is the one the statement returns, on either database
(`tests/recall/test_keyword_scan.py`), as long as the client's `log` gives the
server's `ln` to the last bit (both are the C library's). What it saves is the
statement: on PostgreSQL about 1.4 ms of a recall of a 160-memory scope (its round
trip, the postings' lookups and their window), on SQLite about 0.6 ms; scoring in
hand costs a fraction of a millisecond, growing with the memories' terms, not the
question's."""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from memoryd.recall.bm25 import K1, MILLI, POINTS, B
from memoryd.recall.search import LIST_LIMIT, ScopeStats
from memoryd.recall.trigrams import TEXT_CACHE


@functools.lru_cache(maxsize=TEXT_CACHE)
def term_counts(search_text: str) -> dict[str, int]:
    """A memory's postings as its triggers write them (search_index.py): each term of its
    stored search text and how often it occurs. Kept, as its trigrams are: a scope's
    memories are scored again at its next recall."""
    return dict(Counter(search_text.split()))


def bm25_scanned(
    rows: Sequence[Any],
    terms: Sequence[str],
    stats: ScopeStats,
    weights: Sequence[int] | None = None,
    limit: int = LIST_LIMIT,
) -> list[tuple[int, float]]:
    """(memory id, BM25 score) of the `rows` (a whole scope, with their id, search_text
    and search_length) holding any of the distinct `terms`, each weighed by its
    `weights` (bm25.term_weights), best first, at most `limit`: what bm25_ranked returns
    for them."""
    docs = [(term_counts(row.search_text or ""), row.search_length) for row in rows]
    points = bm25_points(docs, terms, stats, weights)
    scored = [(p, row.id) for p, row in zip(points, rows, strict=True) if p is not None]
    scored.sort(key=lambda item: (-item[0], -item[1]))
    return [(mid, p / POINTS) for p, mid in scored[:limit]]


def bm25_points(
    docs: Sequence[tuple[Mapping[str, int], int]],
    terms: Sequence[str],
    stats: ScopeStats,
    weights: Sequence[int] | None = None,
) -> list[float | None]:
    """Each document's BM25 points (its terms with their counts, and its length) for the
    distinct `terms`, weighed by their `weights` (all alike without); None for one that
    holds none of them."""
    if not terms or not stats.docs:
        return [None] * len(docs)
    alike = [int(MILLI)] * len(terms)
    by_term = dict(zip(terms, alike if weights is None else weights, strict=True))
    # Over each memory's own terms (tens), not the question's (up to 256 for a pasted
    # dialogue): the terms both hold.
    shared = [found.keys() & by_term.keys() for found, _ in docs]
    holders = Counter(term for held in shared for term in held)
    idf = {
        term: _idf(float(n), float(stats.docs)) * (by_term[term] / MILLI)
        for term, n in holders.items()
    }
    average = stats.average
    out: list[float | None] = []
    for (found, length), held in zip(docs, shared, strict=True):
        # Whole numbers well below 2**53: the sum is exact in any order.
        parts = (_part(idf[t], float(found[t]), float(length), average) for t in held)
        out.append(sum(parts, 0.0) if held else None)
    return out


def _idf(n: float, counted: float) -> float:
    """bm25._bm25_statement's idf, for a term `n` memories hold."""
    docs = n if n > counted else counted
    return math.log(1.0 + (docs - n + 0.5) / (n + 0.5))


def _part(idf: float, tf: float, length: float, average: float) -> float:
    """bm25._bm25_statement's part of one term in one memory, in whole points, for its
    `idf` already weighed."""
    norm = K1 * (1.0 - B + B * length / average)
    return float(math.floor(idf * tf * (K1 + 1.0) / (tf + norm) * POINTS))
