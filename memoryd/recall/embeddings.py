"""Semantic recall: a third ranked list from embedding vectors, on when a model is set.

Vectors (from embedders.py's providers) are unit-length float32 bytes on the memory. A
scope's vectors are compared in one numpy product and kept in memory (up to
embedding_cache_mb per process) until any of them is written again; query vectors are
kept too. Memories are embedded off the chat path (recall/backfill.py). Any failure
only logs: recall goes on by keyword.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from memoryd.errors import ConfigError, LLMError
from memoryd.memo import RecentMemo
from memoryd.models.keys import Scope
from memoryd.models.tables import Memory, MemoryStatus
from memoryd.recall import search, vector_model
from memoryd.recall.embedders import MAX_INPUT_CHARS, Vectors, embedder, unit
from memoryd.settings import Settings, StorageSettings
from memoryd.text import last_line

log = logging.getLogger(__name__)

STAMP_RECHECK_SECONDS = 30.0  # a large scope's cache stamp is read at most this often


# --------------------------------------------------------------------------- queries


class _QueryCache:
    """Recent query vectors (seed 004 §4.3): a repeated question costs no model call."""

    def __init__(self) -> None:
        self.items: OrderedDict[tuple[str, ...], Vectors] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: tuple[str, ...]) -> Vectors | None:
        with self.lock:
            vector = self.items.get(key)
            if vector is not None:
                self.items.move_to_end(key)
            return vector

    def put(self, key: tuple[str, ...], vector: Vectors, size: int) -> None:
        with self.lock:
            self.items[key] = vector
            while len(self.items) > size:
                self.items.popitem(last=False)


_queries = _QueryCache()


def _model_key(settings: Settings) -> tuple[str, str, str]:
    """Which model a vector came from: vectors of two models are never compared."""
    return (
        settings.recall.embedding_provider,
        str(settings.recall.embedding_model),
        str(settings.recall.embedding_base_url or settings.llm.llm_base_url),
    )


def embed_query(
    settings: Settings, query: str, *, stress_last_line: bool = False
) -> Vectors | None:
    """The query's unit vector, or None when embeddings are off or the provider fails.
    With `stress_last_line` (a recall's question), the vector of a query of several lines
    has its last line's added, at embedding_last_line_weight: one call for both."""
    if not settings.embeddings_on or not query.strip():
        return None
    text = query[:MAX_INPUT_CHARS]
    weight = settings.recall.embedding_last_line_weight if stress_last_line else 0.0
    last = last_line(query) if weight else None
    texts = [text] if last is None else [text, last[:MAX_INPUT_CHARS]]
    key = (*_model_key(settings), *texts, *([repr(weight)] if last else []))
    cached = _queries.get(key)
    if cached is not None:
        return cached
    try:
        vectors = embedder(settings).embed(texts, query=True)
    except (LLMError, ConfigError) as exc:
        log.warning("query embedding failed, recalling without it: %s", exc)
        return None
    vector: Vectors = vectors[0]
    if last is not None:
        vector = unit([vector + weight * vectors[1]])[0]
    if settings.recall.embedding_query_cache:
        _queries.put(key, vector, settings.recall.embedding_query_cache)
    return vector


# Vectors of texts that are not memories yet (the user turns recall/pending.py reads
# until they are extracted), by model, row id and a hash of the text: each is embedded
# once, before the recall that first reads it opens its transaction. Dropped whole with
# any erased scope. After a failure the provider is left alone for TEXTS_PAUSE_SECONDS,
# so an outage does not cost every recall a failing call.
_text_vectors: RecentMemo[Vectors] = RecentMemo(seconds=600, size=4096)
TEXTS_PAUSE_SECONDS = 30.0
_texts_paused: RecentMemo[bool] = RecentMemo(seconds=TEXTS_PAUSE_SECONDS, size=64)


def known_vectors(settings: Settings, texts: dict[int, str]) -> dict[int, Vectors]:
    """The vectors of `texts` (by row id) already embedded: no model call."""
    model = _model_key(settings)
    found = {i: _text_vectors.get((*model, i, hash(text))) for i, text in texts.items()}
    return {i: vector for i, vector in found.items() if vector is not None}


def embed_texts(settings: Settings, texts: dict[int, str]) -> dict[int, Vectors]:
    """Unit vectors of `texts` (by row id), as passages, in one call for those not yet
    embedded; only those known when embeddings are off or the provider fails. Call it
    outside any transaction: it may wait on the model."""
    if not settings.embeddings_on or not texts:
        return {}
    found = known_vectors(settings, texts)
    missing = [row_id for row_id in texts if row_id not in found]
    model = _model_key(settings)
    if not missing or _texts_paused.get(model):
        return found
    try:
        fresh = embedder(settings).embed([texts[i][:MAX_INPUT_CHARS] for i in missing])
    except (LLMError, ConfigError) as exc:
        _texts_paused.put(model, True)
        log.warning("embedding recent turns failed, matching them by words: %s", exc)
        return found
    for row_id, vector in zip(missing, fresh, strict=True):
        _text_vectors.put((*model, row_id, hash(texts[row_id])), vector)
        found[row_id] = vector
    return found


# ---------------------------------------------------------------------- scope vectors


# (count, id sum, vector_version sum, the model whose vectors the entry holds, and
# whether it holds those from before models were named)
Stamp = tuple[int, int, int, int | None, bool]


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

    def recent(self, key: Hashable, now: float, model_id: int | None) -> tuple[Any, Vectors] | None:
        with self.lock:
            entry = self.items.get(key)
            if entry is None or len(entry.ids) <= search.LARGE_SCOPE:
                return None
            if entry.stamp[3] != model_id:
                return None
            if now - entry.checked_at >= STAMP_RECHECK_SECONDS:
                return None
            self.items.move_to_end(key)
            return entry.ids, entry.matrix

    def get(self, key: Hashable, stamp: Stamp, now: float) -> tuple[Any, Vectors] | None:
        with self.lock:
            entry = self.items.get(key)
            if entry is None or entry.stamp != stamp:
                return None
            entry.checked_at = now
            self.items.move_to_end(key)
            return entry.ids, entry.matrix

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


@dataclass
class _ScopeEntry:
    stamp: Stamp
    ids: NDArray[np.int64]
    matrix: Vectors
    checked_at: float

    @property
    def nbytes(self) -> int:
        return int(self.ids.nbytes + self.matrix.nbytes)


_scopes = _ScopeCache()


def clear_caches() -> None:
    """Forget this process's query and scope vectors (after the database under a running
    process was replaced, or between tests that reuse one database)."""
    with _queries.lock:
        _queries.items.clear()
    _scopes.clear()
    _text_vectors.clear()
    _texts_paused.clear()
    vector_model.clear()


def forget_scope(settings: StorageSettings, scope: Scope) -> None:
    """Drop the scope's vectors from this process (after it was erased). Other
    processes notice within STAMP_RECHECK_SECONDS; until then their ranking reads every
    candidate by id, and an erased one is found no more."""
    _scopes.drop((settings.resolved_database_url, scope.agent_id, scope.user_id))
    _text_vectors.clear()


def cached_scopes() -> list[Hashable]:
    """Keys (database URL, agent, user) of the scopes whose vectors this process holds,
    least recently used first."""
    with _scopes.lock:
        return list(_scopes.items)


def cached_bytes() -> int:
    """Bytes of scope vectors (and their ids) this process holds."""
    with _scopes.lock:
        return _scopes.nbytes


def counted_stamp(scope_rows: Sequence[Any]) -> tuple[int, int, int]:
    """The count, id sum and vector_version sum of the embedded memories among a whole
    scope's rows (search.read_scope, without filters): scope_counts without a statement."""
    embedded = [row for row in scope_rows if row.embedded]
    return len(embedded), sum(r.id for r in embedded), sum(r.vector_version for r in embedded)


def _embedded(scope: Scope) -> tuple[ColumnElement[bool], ...]:
    """The scope's embedded active memories (its own and shared)."""
    return (
        Memory.readable_by(scope),
        Memory.status == MemoryStatus.ACTIVE,
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
) -> tuple[NDArray[np.int64], Vectors]:
    """Ids and vectors of the scope's embedded active memories (its own and shared).
    `counted` is counted_stamp of the scope read whole, when recall read it: the
    statement that counts them is then spared."""
    key = (settings.storage.resolved_database_url, scope.agent_id, scope.user_id)
    now = time.monotonic()
    model_id = vector_model.known_id(session, settings)
    cached = _scopes.recent(key, now, model_id)
    if cached is not None:
        return cached
    count, id_sum, versions = counted or scope_counts(session, scope)
    unnamed = vector_model.compares_unnamed(session, settings, model_id)
    stamp = (int(count), int(id_sum), int(versions), model_id, unnamed)
    cached = _scopes.get(key, stamp, now)
    if cached is not None:
        return cached
    read = select(Memory.id, Memory.vector, Memory.vector_model_id).where(*_embedded(scope))
    # Only this model's vectors (and those from before models were named, if its own).
    own: set[int | None] = set() if model_id is None else {model_id}
    if unnamed:
        own.add(None)
    rows = [r for r in session.execute(read) if r.vector_model_id in own]
    dims = {len(r.vector) for r in rows}
    # Vectors from before models were named may be of two models' sizes (a change made
    # without a reset then): only those of the newest size are compared.
    if len(dims) > 1:
        newest = len(max(rows, key=lambda r: r.id).vector)
        rows = [r for r in rows if len(r.vector) == newest]
    ids = np.array([r.id for r in rows], dtype=np.int64)
    matrix = (
        np.frombuffer(b"".join(r.vector for r in rows), dtype=np.float32).reshape(len(rows), -1)
        if rows
        else np.zeros((0, 0), dtype=np.float32)
    )
    budget = int(settings.recall.embedding_cache_mb * 1024 * 1024)
    _scopes.put(key, _ScopeEntry(stamp, ids, matrix, now), budget)
    return ids, matrix


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
