"""Optional embeddings: set MEMORYD_EMBEDDING_MODEL (with an LLM endpoint) to add a third
ranked list to recall. Off by default and never required: any failure only logs.

Vectors are stored as JSON on the memory and compared on recall's bounded candidate set
(a few hundred rows per scope), so no vector extension is needed on either database.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from sqlalchemy import select, update

from memoryd.errors import LLMError
from memoryd.models.db import session_scope
from memoryd.models.keys import Scope
from memoryd.models.tables import Memory, MemoryStatus
from memoryd.settings import Settings

if TYPE_CHECKING:
    from memoryd.llm.client import LLMClient

log = logging.getLogger(__name__)

FILL_CHUNK = 64


def enabled(settings: Settings) -> bool:
    return bool(settings.embedding_model) and settings.llm_configured


@lru_cache(maxsize=4)
def _client(settings: Settings) -> LLMClient:
    from memoryd.llm.client import LLMClient  # the openai SDK loads only when used

    return LLMClient(settings)


def embed_query(settings: Settings, query: str) -> list[float] | None:
    """The query's vector, or None when embeddings are off or the endpoint fails."""
    if not enabled(settings) or not query.strip():
        return None
    try:
        return _client(settings).embed(str(settings.embedding_model), [query[:4000]])[0]
    except LLMError as exc:
        log.warning("query embedding failed, recalling without it: %s", exc)
        return None


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def fill_missing(settings: Settings, scope: Scope | None = None, limit: int = 512) -> int:
    """Embed active memories that have no vector yet; the HTTP call runs with no
    transaction open. Returns how many were filled."""
    if not enabled(settings):
        return 0
    filled = 0
    while filled < limit:
        with session_scope(settings) as session:
            stmt = select(Memory.id, Memory.name, Memory.content).where(
                Memory.embedding.is_(None), Memory.status == MemoryStatus.ACTIVE
            )
            if scope is not None:
                stmt = stmt.where(
                    Memory.agent_id == scope.agent_id, Memory.user_id == scope.user_id
                )
            rows = session.execute(stmt.order_by(Memory.id).limit(FILL_CHUNK)).all()
        if not rows:
            break
        try:
            vectors = _client(settings).embed(
                str(settings.embedding_model), [f"{r.name}: {r.content}" for r in rows]
            )
        except LLMError as exc:
            log.warning("embedding %d memories failed: %s", len(rows), exc)
            break
        with session_scope(settings) as session:
            session.execute(
                update(Memory),
                [{"id": r.id, "embedding": v} for r, v in zip(rows, vectors, strict=True)],
            )
        filled += len(rows)
    return filled
