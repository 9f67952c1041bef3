"""Recall's trigram list: memories whose words resemble the query's (partial words,
inflections, unsegmented scripts), the same way on both databases.

A scope of up to search.SCAN_LIMIT memories is scored row by row, as the share of the
query's padded word trigrams each memory holds. A larger one takes its candidates from
the keyword postings both databases already keep (memory_terms): the memories holding a
term that starts like one of the query's words, read by range from the postings' primary
key (agent, user, term), so the cost follows the postings of those few prefixes, not the
scope's size or the length of its texts. Their similarity is the share of the query's
prefixes they hold, counted by the database: re-scoring them by trigrams in Python cost
more than the rest of a recall on long questions, and gave no better hit@5 in
bench/quality.py (RealMem 0.676 either way with a 0.3 threshold; 0.681 without one).

A prefix is the first 60% of a word's stem, at least 3 characters: "vegetar" finds
"vegetarian", "dentst" finds "dentist"; a word misspelt in its first letters is left to
the keyword and vector lists. Chinese is searched by its character pairs.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import (
    ARRAY,
    Select,
    String,
    Subquery,
    bindparam,
    func,
    literal,
    select,
    true,
    union_all,
)
from sqlalchemy.orm import Session

from memoryd.models.db import is_sqlite
from memoryd.models.keys import Scope
from memoryd.models.tables import Memory, MemoryTerm
from memoryd.recall import search
from memoryd.recall.search import (
    LIST_LIMIT,
    SCORING_COLUMNS,
    ScopeStats,
    narrowing_parameters,
)
from memoryd.text import content_words, search_tokens, word_trigrams

MAX_PREFIXES = 16  # the query's longest words: the most specific
MIN_PREFIX = 3
PREFIX_SHARE = 0.6


# Texts whose trigrams are kept, most recently used first: a scope's memories are scored
# again at its next recall (every turn of a chat, each batch's prefetch). About 1 KB a
# text of a few sentences, 5 KB at most (a 2,000-character memory): 10-40 MB.
TEXT_CACHE = 8192


class TrigramShare:
    """The share of a query's padded word trigrams (pg_trgm's: "  c", " co", "cof", …,
    "ee ") that a text holds, as text.word_trigrams counts them. A text's trigrams are
    kept (TEXT_CACHE): building them costs about 30 µs a memory, and testing each of a
    long question's few hundred trigrams against the text instead cost up to 100 µs a
    memory, 20 ms for a scope of 200 (bench/quality.py's RealMem questions)."""

    def __init__(self, words: str) -> None:
        self.grams = word_trigrams(words)

    def __call__(self, text: str) -> float:
        return self._share(_text_trigrams(text))

    def uncached(self, text: str) -> float:
        """The share for a text read once (a pending turn): nothing of it is kept."""
        return self._share(word_trigrams(text))

    def _share(self, grams: Iterable[str]) -> float:
        if not self.grams:
            return 0.0
        return len(self.grams.intersection(grams)) / len(self.grams)


@functools.lru_cache(maxsize=TEXT_CACHE)
def _text_trigrams(text: str) -> tuple[str, ...]:
    """A tuple: a third of a set's memory, and intersected as fast."""
    return tuple(word_trigrams(text))


def trigram_ranked(
    session: Session,
    scope: Scope,
    categories: Sequence[str] | None,
    tiers: Sequence[str] | None,
    query: str,
    min_similarity: float,
    stats: ScopeStats,
    limit: int = LIST_LIMIT,
    seen: dict[int, Any] | None = None,
    scope_rows: Sequence[Any] | None = None,
) -> list[tuple[int, float]]:
    """(memory id, similarity) of the scope's active memories (of those categories and
    tiers, when given) whose words resemble the query's content words, best first.
    `seen` collects each candidate's SCORING_COLUMNS; `scope_rows` are a small scope's
    memories when search.read_scope already has them."""
    words = content_words(query[:1000])
    if not words or not stats.docs:
        return []
    scored: list[tuple[float, Any]]
    if scope_rows is None and stats.docs > search.SCAN_LIMIT:
        chosen = prefixes(words)
        rows = _prefix_candidates(session, scope, categories, tiers, chosen, limit)
        # Every holder of a prefix: a term that starts like the query's word is a match
        # already (a threshold here cost RealMem 0.8 points of hit@5).
        scored = [(round(r.prefixes / len(chosen), 6), r) for r in rows]
    else:
        if scope_rows is None:
            params = search.search_params(scope, categories, tiers)
            scope_rows = search.scope_rows(session, params)
        share_of = TrigramShare(words)
        scored = [(share, r) for r in scope_rows if (share := share_of(r.body)) >= min_similarity]
    ranked = sorted(
        scored,
        key=lambda item: (-item[0], -item[1].id),
    )[:limit]
    if seen is not None:
        seen.update((r.id, r) for _, r in ranked)
    return [(r.id, share) for share, r in ranked]


def prefixes(words: str) -> list[str]:
    """The term prefixes a large scope's candidates are found by: of each word's stem,
    its first PREFIX_SHARE, at least MIN_PREFIX characters (shorter words are left to
    the keyword list); of an unsegmented script, its character pairs, which are terms
    themselves (text.search_tokens). Longest first, at most MAX_PREFIXES, none inside
    another (the shorter one's range holds the longer one's)."""
    found: set[str] = set()
    for token in search_tokens(words):
        if len(token) >= MIN_PREFIX:
            found.add(token[: max(MIN_PREFIX, math.ceil(len(token) * PREFIX_SHARE))])
        elif len(token) == 2 and not token.isascii():
            found.add(token)
    chosen: list[str] = []
    for prefix in sorted(found, key=lambda p: (len(p), p)):
        if not any(prefix.startswith(shorter) for shorter in chosen):
            chosen.append(prefix)
    return sorted(chosen, key=lambda p: (-len(p), p))[:MAX_PREFIXES]


def _prefix_candidates(
    session: Session,
    scope: Scope,
    categories: Sequence[str] | None,
    tiers: Sequence[str] | None,
    prefixes: list[str],
    limit: int,
) -> Sequence[Any]:
    """Up to `limit` of the scope's active memories holding a term that starts with one
    of `prefixes`, those holding the most of the prefixes first (then the most such
    terms), with their SCORING_COLUMNS and how many of the prefixes they hold."""
    if not prefixes:
        return []
    params = {**search.search_params(scope, categories, tiers), "limit": limit}
    # Terms are letters and digits, so [prefix, next prefix) holds exactly the terms
    # that start with it, in any collation that orders them letter by letter.
    highs = [prefix[:-1] + chr(ord(prefix[-1]) + 1) for prefix in prefixes]
    postgres = not is_sqlite(session)
    if postgres:
        params.update(lows=prefixes, highs=highs)
    else:
        for i, (low, high) in enumerate(zip(prefixes, highs, strict=True)):
            params.update({f"low_{i}": low, f"high_{i}": high})
    statement = _prefix_statement(
        postgres, 0 if postgres else len(prefixes), bool(categories), bool(tiers)
    )
    return session.connection().execute(statement, params).all()


@functools.cache
def _prefix_statement(postgres: bool, prefixes: int, categories: bool, tiers: bool) -> Select[Any]:
    """_prefix_candidates' statement, built once per shape: the postings matching each
    prefix (_matches), counted per memory. Postings exist for active memories only;
    categories and tiers are matched on the memories, before the limit."""
    matches = _matches(postgres, prefixes)
    held = func.count(matches.c.prefix.distinct())
    matching = select(matches.c.memory_id, held.label("prefixes"))
    if categories or tiers:
        matching = matching.join(Memory, Memory.id == matches.c.memory_id).where(
            *narrowing_parameters(categories, tiers)
        )
    best = (
        matching.group_by(matches.c.memory_id)
        .order_by(held.desc(), func.count().desc(), matches.c.memory_id.desc())
        .limit(bindparam("limit"))
        .subquery("best")
    )
    return select(*SCORING_COLUMNS, best.c.prefixes).join(best, best.c.memory_id == Memory.id)


def _matches(postgres: bool, prefixes: int) -> Subquery:
    """(memory_id, prefix number) of the scope's postings whose term starts with one of
    `prefixes` (their number) ranges of the postings' key. On PostgreSQL the ranges come
    as two arrays joined to the postings (one statement text, prepared once: see
    search.listed); on SQLite, one range query per prefix (an OR of ranges made it read
    all of the scope's postings)."""
    if not postgres:
        in_scope = (
            MemoryTerm.agent_id == bindparam("agent"),
            MemoryTerm.user_id.in_(bindparam("users", expanding=True)),
        )
        ranges = [
            select(MemoryTerm.memory_id, literal(i).label("prefix")).where(
                *in_scope,
                MemoryTerm.term >= bindparam(f"low_{i}"),
                MemoryTerm.term < bindparam(f"high_{i}"),
            )
            for i in range(prefixes)
        ]
        return union_all(*ranges).subquery("matches")
    bounds = (
        func.unnest(bindparam("lows", type_=ARRAY(String)), bindparam("highs", type_=ARRAY(String)))
        .table_valued("low", "high", with_ordinality="prefix")
        .render_derived(name="bounds")
    )
    # Each prefix's postings of each readable user are one range scan of the postings'
    # key (agent, user, term): a LATERAL subquery, kept as one by OFFSET 0 (else the
    # planner flattens it into a join). As a join, the planner, misled by a new user's
    # statistics, read all of the scope's postings and tested each against every range:
    # 40 ms in a scope of 8,000 postings; with the users as an IN list, a planner without
    # statistics scanned the agent's whole range of terms and filtered the users.
    who = search.users_table()
    postings = (
        select(MemoryTerm.memory_id)
        .where(
            MemoryTerm.agent_id == bindparam("agent"),
            MemoryTerm.user_id == who.c.user_id,
            MemoryTerm.term >= bounds.c.low,
            MemoryTerm.term < bounds.c.high,
        )
        .offset(0)
        .lateral("postings")
    )
    return (
        select(postings.c.memory_id, bounds.c.prefix)
        .select_from(bounds)
        .join(who, true())
        .join(postings, true())
        .subquery("matches")
    )
