"""The keyword list of a small scope, scored in Python over the rows recall has already
read (search.read_scope), instead of by search.bm25_ranked's statement.

Same formula, same constants, same operations in the same order, each term's part
floored to whole points before the sum, and the same ties (best points, then newest
id): the list is the one the statement returns, on either database
(`tests/recall/test_keyword_scan.py`). What it saves is the statement: on PostgreSQL
about 1.4 ms of a recall of a 160-memory scope (its round trip, the postings' lookups
and their window), on SQLite about 0.6 ms."""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from memoryd.recall.search import K1, LIST_LIMIT, POINTS, B, ScopeStats
from memoryd.recall.trigrams import TEXT_CACHE


@functools.lru_cache(maxsize=TEXT_CACHE)
def term_counts(search_text: str) -> dict[str, int]:
    """A memory's postings as its triggers write them (search_index.py): each term of its
    stored search text and how often it occurs. Kept, as its trigrams are: a scope's
    memories are scored again at its next recall."""
    return dict(Counter(search_text.split()))


def bm25_scanned(
    rows: Sequence[Any], terms: Sequence[str], stats: ScopeStats, limit: int = LIST_LIMIT
) -> list[tuple[int, float]]:
    """(memory id, BM25 score) of the `rows` (a whole scope, with their id, search_text
    and search_length) holding any of the distinct `terms`, best first, at most `limit`:
    what bm25_ranked returns for them."""
    if not terms or not stats.docs:
        return []
    held = [(row, term_counts(row.search_text or "")) for row in rows]
    counts = {term: sum(term in found for _, found in held) for term in terms}
    idf = {term: _idf(float(n), float(stats.docs)) for term, n in counts.items() if n}
    average = stats.average
    scored = []
    for row, found in held:
        points, matched = 0.0, False
        length = float(row.search_length)
        for term, weight in idf.items():
            if tf := found.get(term):
                points += _part(weight, float(tf), length, average)
                matched = True
        if matched:
            scored.append((points, row.id))
    scored.sort(key=lambda item: (-item[0], -item[1]))
    return [(mid, points / POINTS) for points, mid in scored[:limit]]


def _idf(n: float, counted: float) -> float:
    """search._bm25_statement's idf, for a term `n` memories hold."""
    docs = n if n > counted else counted
    return math.log(1.0 + (docs - n + 0.5) / (n + 0.5))


def _part(idf: float, tf: float, length: float, average: float) -> float:
    """search._bm25_statement's part of one term in one memory, in whole points."""
    norm = K1 * (1.0 - B + B * length / average)
    return float(math.floor(idf * tf * (K1 + 1.0) / (tf + norm) * POINTS))
