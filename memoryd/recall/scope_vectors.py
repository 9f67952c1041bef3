"""A scope's memory vectors in this process, for the embedding list: compared in one
numpy product and kept (up to embedding_cache_mb) until any of them is written again.

A scope whose memories changed since its vectors were read (a batch extracted, an edit
re-embedded) reads again only what changed: the ids and vector versions of its embedded
memories, then the vectors of those it does not hold at their version. A user's
thousands of memories are not read again for each new one.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Row, func, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from memoryd.models.base import written_in
from memoryd.models.keys import Scope
from memoryd.models.tables import Memory, MemoryStatus
from memoryd.recall import search, vector_model
from memoryd.recall.embedders import Vectors
from memoryd.settings import Settings, StorageSettings

STAMP_RECHECK_SECONDS = 30.0  # a large scope's cache stamp is read at most this often
# Past this share of a scope changed, or this many vectors, its vectors are read whole
# in one statement (the ids bound one by one stay well under a driver's limit).
REREAD_SHARE = 0.5
MAX_BY_ID = 1000

# (count, id sum, vector_version sum, the model whose vectors the entry holds, and
# whether it holds those from before models were named)
Stamp = tuple[int, int, int, int | None, bool]
Ids = NDArray[np.int64]


# What an entry costs beside its arrays (its key, stamp, the arrays' own objects and its
# place in the cache): counted too, so the scopes of users with no vector yet, by the
# million over months, are held within the budget like the others.
ENTRY_OVERHEAD = 1024


@dataclass
class _ScopeEntry:
    stamp: Stamp
    ids: Ids  # ascending
    versions: Ids  # each vector's vector_version
    matrix: Vectors
    checked_at: float

    @property
    def nbytes(self) -> int:
        arrays = self.ids.nbytes + self.versions.nbytes + self.matrix.nbytes
        return int(arrays + ENTRY_OVERHEAD)

    @property
    def vectors(self) -> tuple[Ids, Vectors]:
        return self.ids, self.matrix


class _ScopeCache:
    """Each scope's (ids, unit vectors) of one model, valid while the scope's embedded
    active memories and their vectors are unchanged: their count, id sum and
    vector_version sum, read with one index-only query. Every vector written adds one
    to its memory's vector_version, so an edit re-embedded or a reset refilled between
    two recalls changes the stamp even though count and ids do not. A scope larger than
    search.LARGE_SCOPE is re-checked every STAMP_RECHECK_SECONDS, not on every query: a
    vector written meanwhile is compared a little later (the keyword and trigram lists
    find the memory at once), and a memory retired meanwhile is dropped by ranking,
    which reads every candidate through the active filter. Held within a byte budget,
    least recently used scopes dropped first."""

    def __init__(self) -> None:
        self.items: OrderedDict[Hashable, _ScopeEntry] = OrderedDict()
        self.nbytes = 0
        self.lock = threading.Lock()

    def recent(self, key: Hashable, now: float, model_id: int | None) -> _ScopeEntry | None:
        with self.lock:
            entry = self.items.get(key)
            if entry is None or len(entry.ids) <= search.LARGE_SCOPE:
                return None
            if entry.stamp[3] != model_id:
                return None
            if now - entry.checked_at >= STAMP_RECHECK_SECONDS:
                return None
            self.items.move_to_end(key)
            return entry

    def get(self, key: Hashable, stamp: Stamp, now: float) -> _ScopeEntry | None:
        """The entry of `stamp`; else None, the entry left for `held` to refresh."""
        with self.lock:
            entry = self.items.get(key)
            if entry is None or entry.stamp != stamp:
                return None
            entry.checked_at = now
            self.items.move_to_end(key)
            return entry

    def held(self, key: Hashable, stamp: Stamp) -> _ScopeEntry | None:
        """The scope's entry, whatever its counts, if it holds the same model's vectors
        as `stamp` would: what a refresh can keep."""
        with self.lock:
            entry = self.items.get(key)
            return entry if entry is not None and entry.stamp[3:] == stamp[3:] else None

    def put(self, key: Hashable, entry: _ScopeEntry, budget: int) -> None:
        """Keep the entry unless it alone is over budget (then every recall of that scope
        reads its vectors: slower, but the process stays within what was configured)."""
        with self.lock:
            old = self.items.pop(key, None)
            self.nbytes -= old.nbytes if old is not None else 0
            if entry.nbytes > budget:
                return
            self.items[key] = entry
            self.nbytes += entry.nbytes
            while self.nbytes > budget:
                _, dropped = self.items.popitem(last=False)
                self.nbytes -= dropped.nbytes

    def clear(self) -> None:
        with self.lock:
            self.items.clear()
            self.nbytes = 0

    def drop(self, key: Hashable) -> None:
        with self.lock:
            old = self.items.pop(key, None)
            self.nbytes -= old.nbytes if old is not None else 0


_scopes = _ScopeCache()


def clear() -> None:
    _scopes.clear()


def drop(settings: StorageSettings, scope: Scope) -> None:
    _scopes.drop((settings.resolved_database_url, scope.agent_id, scope.user_id))


def cached_scopes() -> list[Hashable]:
    """Keys (database URL, agent, user) of the scopes whose vectors this process holds,
    least recently used first."""
    with _scopes.lock:
        return list(_scopes.items)


def cached_bytes() -> int:
    """Bytes of scope vectors (and their ids and versions) this process holds, each
    entry counting ENTRY_OVERHEAD beside them."""
    with _scopes.lock:
        return _scopes.nbytes


def counted_stamp(scope_rows: Sequence[Any]) -> tuple[int, int, int]:
    """The count, id sum and vector_version sum of the embedded memories among a whole
    scope's rows (search.read_scope, without filters): scope_counts without a statement."""
    embedded = [row for row in scope_rows if row.embedded]
    return len(embedded), sum(r.id for r in embedded), sum(r.vector_version for r in embedded)


def _embedded(scope: Scope) -> tuple[ColumnElement[bool], ...]:
    """The scope's embedded active memories (its own and shared). The status written in
    the text: prepared, the stamp's and the listing's generic plans must still see the
    partial index they read (tests/recall/test_plans.py)."""
    return (
        Memory.readable_by(scope),
        Memory.status == written_in(MemoryStatus.ACTIVE),
        Memory.vector.is_not(None),
    )


def scope_counts(session: Session, scope: Scope) -> tuple[int, int, int]:
    """The count, id sum and vector_version sum of the scope's embedded active memories:
    what the cache's stamp holds of them, counted by the database."""
    count, id_sum, versions = session.execute(
        select(
            func.count(),
            func.coalesce(func.sum(Memory.id), 0),
            func.coalesce(func.sum(Memory.vector_version), 0),
        ).where(*_embedded(scope))
    ).one()
    return int(count), int(id_sum), int(versions)


def scope_vectors(
    session: Session,
    settings: Settings,
    scope: Scope,
    counted: tuple[int, int, int] | None = None,
) -> tuple[Ids, Vectors]:
    """Ids and vectors of the scope's embedded active memories (its own and shared).
    `counted` is counted_stamp of the scope read whole, when recall read it: the
    statement that counts them is then spared."""
    key = (settings.storage.resolved_database_url, scope.agent_id, scope.user_id)
    now = time.monotonic()
    model_id = vector_model.known_id(session, settings)
    cached = _scopes.recent(key, now, model_id)
    if cached is not None:
        return cached.vectors
    count, id_sum, versions = counted or scope_counts(session, scope)
    unnamed = vector_model.compares_unnamed(session, settings, model_id)
    stamp = (int(count), int(id_sum), int(versions), model_id, unnamed)
    cached = _scopes.get(key, stamp, now)
    if cached is not None:
        return cached.vectors
    held = _scopes.held(key, stamp)
    entry = _refreshed(session, scope, held, stamp) if held is not None else None
    if entry is None:
        entry = _read(session, scope, stamp)
    entry.checked_at = now
    _scopes.put(key, entry, int(settings.recall.embedding_cache_mb * 1024 * 1024))
    return entry.vectors


def _own_rows(
    session: Session, scope: Scope, stamp: Stamp, *columns: Any, ids: Ids | None = None
) -> list[Row[Any]]:
    """`columns` of the scope's embedded memories (those of `ids`, when given) whose
    vectors an entry of `stamp` compares: its model's, and those from before models were
    named if they are its own."""
    model_id, unnamed = stamp[3], stamp[4]
    own: set[int | None] = set() if model_id is None else {model_id}
    if unnamed:
        own.add(None)
    read = select(Memory.vector_model_id, *columns).where(*_embedded(scope))
    if ids is not None:
        read = read.where(Memory.id.in_(ids.tolist()))
    return [row for row in session.execute(read) if row.vector_model_id in own]


def _read(session: Session, scope: Scope, stamp: Stamp) -> _ScopeEntry:
    """The scope's vectors read whole."""
    rows = _own_rows(session, scope, stamp, Memory.id, Memory.vector_version, Memory.vector)
    dims = {len(r.vector) for r in rows}
    # Vectors from before models were named may be of two models' sizes (a change made
    # without a reset then): only those of the newest size are compared.
    if len(dims) > 1:
        newest = len(max(rows, key=lambda r: r.id).vector)
        rows = [r for r in rows if len(r.vector) == newest]
    return _entry(stamp, *_arrays(rows))


def _refreshed(
    session: Session, scope: Scope, held: _ScopeEntry, stamp: Stamp
) -> _ScopeEntry | None:
    """`held` brought up to date: the vectors it holds at their version kept, the
    others read by id. None when much changed (one read whole is then as cheap) or a
    vector of another size came (_read chooses among sizes)."""
    current = _own_rows(session, scope, stamp, Memory.id, Memory.vector_version)
    ids, versions = _versions(current)
    if len(held.ids):  # held.ids ascending: where each current id would stand in it
        at = np.minimum(np.searchsorted(held.ids, ids), len(held.ids) - 1)
        same = (held.ids[at] == ids) & (held.versions[at] == versions)
    else:
        at, same = ids, np.zeros(len(ids), dtype=bool)
    kept, missing = at[same], ids[~same]
    if len(missing) > min(REREAD_SHARE * len(current), MAX_BY_ID):
        return None
    # Read with the scope's filters again: a vector removed or rewritten by another
    # model since the listing is left out, as a whole read would.
    columns = (Memory.id, Memory.vector_version, Memory.vector)
    fresh = _own_rows(session, scope, stamp, *columns, ids=missing) if len(missing) else []
    sizes = {len(row.vector) for row in fresh} | ({held.matrix[0].nbytes} if len(kept) else set())
    if len(sizes) > 1:
        return None  # vectors of two sizes: _read chooses among them
    ids, versions, matrix = _arrays(fresh)
    if len(kept):
        ids = np.concatenate([held.ids[kept], ids])
        versions = np.concatenate([held.versions[kept], versions])
        matrix = np.vstack([held.matrix[kept], matrix]) if fresh else held.matrix[kept]
    return _entry(stamp, ids, versions, matrix)


def _versions(rows: Sequence[Any]) -> tuple[Ids, Ids]:
    """Ids and vector versions of rows."""
    ids = np.fromiter((r.id for r in rows), dtype=np.int64, count=len(rows))
    versions = np.fromiter((r.vector_version for r in rows), dtype=np.int64, count=len(rows))
    return ids, versions


def _arrays(rows: Sequence[Any]) -> tuple[Ids, Ids, Vectors]:
    """Ids, vector versions and vectors of rows read with them."""
    ids, versions = _versions(rows)
    if not rows:
        return ids, versions, np.zeros((0, 0), dtype=np.float32)
    vectors = np.frombuffer(b"".join(r.vector for r in rows), dtype=np.float32)
    return ids, versions, vectors.reshape(len(rows), -1)


def _entry(stamp: Stamp, ids: Ids, versions: Ids, matrix: Vectors) -> _ScopeEntry:
    """An entry of these vectors in id order: however read, one scope's list is the
    same."""
    order = np.argsort(ids, kind="stable")
    return _ScopeEntry(stamp, ids[order], versions[order], matrix[order], checked_at=0.0)


def closest(
    session: Session,
    settings: Settings,
    scope: Scope,
    query: Vectors,
    limit: int,
    counted: tuple[int, int, int] | None = None,
) -> list[tuple[int, float]]:
    """(memory id, cosine) of the scope's memories nearest the query, best first, at
    least embedding_min_similarity. `counted`: see scope_vectors."""
    ids, matrix = scope_vectors(session, settings, scope, counted)
    if not len(ids) or matrix.shape[1] != query.shape[0]:
        return []
    scores = matrix @ query
    top = np.argsort(-scores)[:limit]
    return [
        (int(ids[i]), float(scores[i]))
        for i in top
        if scores[i] >= settings.recall.embedding_min_similarity
    ]
