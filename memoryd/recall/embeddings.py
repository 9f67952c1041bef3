"""Semantic recall: a third ranked list from embedding vectors, on when a model is set.

Vectors (from embedders.py's providers) are unit-length float32 bytes on the memory. A
scope's vectors are compared in one numpy product and kept in memory until any of them
is written again (scope_vectors.py); query vectors are kept here. Memories are embedded
off the chat path (recall/backfill.py). Any failure only logs: recall goes on by
keyword.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from memoryd.errors import ConfigError, LLMError
from memoryd.memo import RecentMemo
from memoryd.models.keys import Scope
from memoryd.recall import scope_vectors, vector_model
from memoryd.recall.embedders import MAX_INPUT_CHARS, Vectors, embedder, unit
from memoryd.settings import Settings, StorageSettings
from memoryd.text import last_line

log = logging.getLogger(__name__)

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


def clear_caches() -> None:
    """Forget this process's query and scope vectors (after the database under a running
    process was replaced, or between tests that reuse one database)."""
    with _queries.lock:
        _queries.items.clear()
    scope_vectors.clear()
    _text_vectors.clear()
    _texts_paused.clear()
    vector_model.clear()


def forget_scope(settings: StorageSettings, scope: Scope) -> None:
    """Drop the scope's vectors from this process (after it was erased). Other
    processes notice within scope_vectors.STAMP_RECHECK_SECONDS; until then their
    ranking reads every candidate by id, and an erased one is found no more."""
    scope_vectors.drop(settings, scope)
    _text_vectors.clear()
