"""What recall's lexical lists share: which memories a search may return (the scope,
its filters), the scope's statistics, a small scope read whole, and the columns
re-scoring needs. The keyword list is in bm25.py (by statement) and keyword_scan.py
(in hand), the trigram list in trigrams.py.

User text never reaches a query syntax raw: terms are letters and digits only
(text.search_tokens), and every value is a bound parameter.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ARRAY,
    BigInteger,
    Executable,
    Select,
    String,
    any_,
    bindparam,
    func,
    literal_column,
    select,
    union_all,
)
from sqlalchemy.orm import InstrumentedAttribute, Session
from sqlalchemy.sql.elements import BindParameter, ColumnElement
from sqlalchemy.sql.selectable import CompoundSelect, TableValuedAlias
from sqlalchemy.types import TypeEngine

from memoryd.memo import RecentMemo
from memoryd.models.base import readable_users, written_in
from memoryd.models.keys import Scope
from memoryd.models.tables import Memory, MemoryStatus

AnyRow = tuple[Any, ...]
Rows = Select[*AnyRow]  # a statement of any columns
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
SCORING_COLUMNS: tuple[Any, ...] = (
    Memory.id,
    Memory.tier,
    Memory.weight,
    Memory.weight_at,
    Memory.updated_at,
    Memory.confidence,
    Memory.name_key,
    Memory.category,
    Memory.occurred_at,
    # When it was said (created_at on rows from before said_at was kept): spread.py.
    func.coalesce(Memory.said_at, Memory.created_at).label("said_at"),
)
# (score, memory id, signals) of the candidates, best first: plain tuples, the Hits built
# only for those returned.
Scored = list[tuple[float, int, dict[str, float]]]


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
    """The values of a search's bound parameters: the scope's readable users (as a list,
    and one by one for each_user: "shared" is None in the shared scope itself, which
    matches no row), and the categories and tiers asked for. The statements that bind
    them are built once per shape."""
    users = readable_users(scope)
    return {
        "agent": scope.agent_id,
        "users": users,
        "user": users[0],
        "shared": users[1] if len(users) > 1 else None,
        "categories": list(categories or ()),
        "tiers": list(tiers or ()),
    }


def shape(params: Mapping[str, Any]) -> tuple[bool, bool]:
    """The shape of search_params' `params` (whether categories, whether tiers), which
    picks the statement built once for it, e.g. each_user(statement, *shape(params))."""
    return bool(params["categories"]), bool(params["tiers"])


def scope_filters(categories: bool, tiers: bool) -> list[ColumnElement[bool]]:
    """An active memory of the agent, of those categories and tiers: each_user's
    conditions beside the user's. The status written in the text, so a statement that
    reads a partial index of active memories (the key read) still can once prepared."""
    where = [
        Memory.agent_id == bindparam("agent"),
        Memory.status == written_in(MemoryStatus.ACTIVE),
    ]
    return where + narrowing_parameters(categories, tiers)


def each_user(statement: Rows, categories: bool, tiers: bool) -> CompoundSelect[*AnyRow]:
    """`statement` over the scope's own memories and over the shared scope's, one UNION
    ALL branch each: each user its own range of the scope index, whatever the planner's
    statistics say. With `user_id IN (...)` PostgreSQL read the agent's every memory by
    agent and status and filtered them by user (docs/benchmarks.md)."""
    where = scope_filters(categories, tiers)
    own = statement.where(Memory.user_id == bindparam("user"), *where)
    return union_all(own, statement.where(Memory.user_id == bindparam("shared"), *where))


def newest_in_scope(
    statement: Rows, categories: bool, tiers: bool, limit: int | BindParameter[int]
) -> Rows:
    """each_user's rows, the most recently updated `limit` of them."""
    rows = each_user(statement, categories, tiers).subquery()
    newest = (rows.c.updated_at.desc(), rows.c.id.desc())
    return select(*rows.c).order_by(*newest).limit(limit)


@functools.cache
def _counted(categories: bool, tiers: bool) -> Executable:
    lengths = each_user(select(Memory.search_length), categories, tiers).subquery()
    return select(func.count(), func.coalesce(func.sum(lengths.c.search_length), 0))


@functools.cache
def _in_scope(categories: bool, tiers: bool) -> Executable:
    # search_text too: a scope read whole is also BM25-scored in hand (keyword_scan.py);
    # and what the embedding cache's stamp sums (scope_vectors.counted_stamp).
    read = (
        Memory.search_length,
        Memory.search_text,
        BODY.label("body"),
        Memory.vector_version,
        Memory.vector.is_not(None).label("embedded"),
    )
    in_scope = each_user(select(*SCORING_COLUMNS, *read), categories, tiers)
    # The limit bound at execution: the statement is built once, SCAN_LIMIT read each time.
    return in_scope.limit(bindparam("scan_limit"))


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
    rows = scope_rows(session, params)
    if len(rows) <= SCAN_LIMIT:
        return ScopeStats(len(rows), sum(r.search_length for r in rows)), rows
    stats = reused_stats(session, params, key)
    _recent_stats.put(("larger", key), stats)
    return stats, None


def scope_rows(session: Session, params: Mapping[str, Any]) -> Sequence[Any]:
    """The memories search_params' `params` select, SCAN_LIMIT + 1 at most (so a larger
    scope shows), with SCORING_COLUMNS and body: the statement built once per shape."""
    statement = _in_scope(*shape(params))
    return session.connection().execute(statement, {**params, "scan_limit": SCAN_LIMIT + 1}).all()


def listed(
    column: InstrumentedAttribute[Any],
    name: str,
    postgres: bool,
    item: type[TypeEngine[Any]] = String,
) -> ColumnElement[bool]:
    """`column` is one of the values of the list parameter `name` (of `item`s). On
    PostgreSQL one array parameter: the statement's text is the same whatever the list's
    length, so psycopg prepares it once and the server stops planning it (a statement per
    length was planned at each run: about 1 ms of a recall's prefix search, and its 16
    prefixes took more parameters than psycopg prepares). SQLite plans in microseconds
    and has no arrays: an IN list, expanded."""
    if postgres:
        return column == any_(bindparam(name, type_=ARRAY(item)))
    return column.in_(bindparam(name, expanding=True))


def of_ids(postgres: bool) -> ColumnElement[bool]:
    """The memory is one of the list parameter "ids" (listed)."""
    return listed(Memory.id, "ids", postgres, BigInteger)


def users_table() -> TableValuedAlias:
    """PostgreSQL: the "users" array parameter as rows, so that each user's postings are
    looked up by equality on the postings' key (agent, user, term)."""
    users = func.unnest(bindparam("users", type_=ARRAY(String)))
    return users.table_valued("user_id").render_derived(name="who")


def narrowing_parameters(categories: bool, tiers: bool) -> list[ColumnElement[bool]]:
    """narrowing's conditions for statements built once: the values are the bind
    parameters "categories" and "tiers"."""
    where: list[ColumnElement[bool]] = []
    if categories:
        where.append(Memory.category.in_(bindparam("categories", expanding=True)))
    if tiers:
        where.append(Memory.tier.in_(bindparam("tiers", expanding=True)))
    return where
