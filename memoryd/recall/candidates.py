"""What the extractor is shown, and where a new fact's duplicates may be, over the
scope's whole store: recall's own ranked search (keyword, trigram, vectors when on) for
what is shown, its keyword list for a fact's near duplicates.

Reads only: nothing is logged as usage, and nothing here is locked. Both run outside the
batch's write transaction; the write re-reads whatever it changes under its locks.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from memoryd.memories.proposals import Fact
from memoryd.models.db import utcnow
from memoryd.models.keys import Scope
from memoryd.recall.bm25 import bm25_ranked
from memoryd.recall.embedders import Vectors
from memoryd.recall.embeddings import embed_query
from memoryd.recall.hits import Hit
from memoryd.recall.rank import recall
from memoryd.recall.search import ScopeStats, reused_stats, search_params
from memoryd.settings import Settings, StorageSettings
from memoryd.text import content_hash, query_tokens

# A batch's turns as a query: its most recent part, as long as recall ever reads.
MAX_QUERY_CHARS = 2000
# Memories searched per fact for a near duplicate, of any category (near): room for
# a few of other categories above the one that matters.
NEARBY_LIMIT = 30


def related(
    session: Session,
    settings: Settings,
    scope: Scope,
    text: str,
    k: int,
    categories: Sequence[str] | None = None,
    *,
    vector: Vectors | None = None,
    fill: bool = False,
) -> list[Hit]:
    """The scope's own active memories (never the shared `*` scope's: extraction cannot
    change those) most related to `text` (and `vector`, query_vector's embedding, when
    given), best first; `fill`: when fewer match, the strongest and most recent after
    them."""
    if k <= 0:
        return []
    hits = _own(session, settings, scope, query_text(text), k, categories, vector)
    if fill and len(hits) < k:
        found = {hit.id for hit in hits}
        strongest = _own(session, settings, scope, "", k, categories, None)
        hits += [hit for hit in strongest if hit.id not in found][: k - len(hits)]
    return hits


def query_text(text: str) -> str:
    """A batch's turns as a query: its most recent part."""
    return text[-MAX_QUERY_CHARS:]


def query_vector(settings: Settings, text: str) -> Vectors | None:
    """The embedding `related` ranks by, when embeddings are on. Computed before any
    transaction opens: it may be a call to the embedding endpoint."""
    return embed_query(settings, query_text(text))


def _own(
    session: Session,
    settings: Settings,
    scope: Scope,
    query: str,
    k: int,
    categories: Sequence[str] | None,
    vector: Vectors | None,
) -> list[Hit]:
    def ranked(limit: int) -> list[Hit]:
        return recall(
            session,
            settings,
            scope,
            query,
            k=limit,
            categories=categories,
            now=utcnow(),
            query_vector=vector,
            spread=False,  # an ongoing chat's own memories are the ones to show
        )

    if not query_tokens(query):  # the strongest and most recent: as deep as ever
        return [hit for hit in ranked(k * 2) if hit.user_id == scope.user_id][:k]
    hits = ranked(k)
    own = [hit for hit in hits if hit.user_id == scope.user_id]
    if len(own) < len(hits):  # shared memories took places: look twice as deep, once
        own = [hit for hit in ranked(k * 2) if hit.user_id == scope.user_id]
    return own[:k]


def nearby(
    session: Session, settings: Settings, scope: Scope, facts: Sequence[Fact]
) -> dict[str, list[int]]:
    """For each fact (by content hash), the memories where a near duplicate may be. The
    scope is counted once for the whole batch: its facts are searched in one snapshot."""
    stats = _own_stats(session, settings.storage, scope)
    return {
        content_hash(fact.content): _near(session, scope, fact.content, stats) for fact in facts
    }


def near(session: Session, settings: Settings, scope: Scope, text: str) -> list[int]:
    """The scope's own memories most like `text` in words, by BM25 alone. A near
    duplicate is judged by its words (text.similarity at 0.85 or more: nearly all of
    them shared), so the trigram and vector lists and re-scoring would add none; BM25
    alone costs a fraction of a recall, once per fact of every batch. Of any category:
    the write checks the category (reconcile._near_duplicate), and asking for one here
    joined every posting of the fact's words to its memory (40 ms for "Favourite book
    is Acme" among 50,000 memories; 7 ms from the postings alone)."""
    if not query_tokens(text):
        return []  # an exact duplicate is still found by its hash
    return _near(session, scope, text, _own_stats(session, settings.storage, scope))


def _own_stats(session: Session, settings: StorageSettings, scope: Scope) -> ScopeStats:
    key = ("near", settings.resolved_database_url, scope.agent_id, scope.user_id)
    return reused_stats(session, search_params(scope, None, None), key)


def _near(session: Session, scope: Scope, text: str, stats: ScopeStats) -> list[int]:
    terms = query_tokens(text)
    ranked = bm25_ranked(
        session, scope, None, None, terms, stats, limit=NEARBY_LIMIT, own_only=True
    )
    return [memory_id for memory_id, _score in ranked]
