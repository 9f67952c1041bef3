"""What recall returns: a memory as the API shows it, with its score and how that
score was made, and the read of those fields for the hits only."""

from __future__ import annotations

import functools

from pydantic import BaseModel
from sqlalchemy import Executable, select

from memoryd.models.schemas import MemoryOut
from memoryd.recall.search import of_ids


class ScoreParts(BaseModel):
    keyword_rank: int | None
    bm25: float | None = None
    similarity: float
    embedding: float | None
    fused: float
    strength: float
    recency: float
    confidence: float
    key: float = 0.0  # 1 when the question names the memory's subject key
    intent: float = 0.0  # 1 when the memory is of the kind the question asks for
    spread: float = 0.0  # given up for its conversation's memories above it (spread.py)
    rerank: float | None = None  # the reranker's relevance, when one ordered this hit


class Hit(MemoryOut):
    score: float
    parts: ScoreParts
    # A turn not yet extracted that matches (recall/pending.py): not a memory yet.
    pending: bool = False
    turn_key: str | None = None

    @property
    def placed_by(self) -> float:
        """What recall placed it by: its score, less what it gave up for the memories of
        its conversation above it (spread.py). Lists built from hits keep that order."""
        return self.score - self.parts.spread


@functools.cache
def hits_read(postgres: bool) -> Executable:
    """What a Hit shows of its memory (MemoryOut's fields), by the list parameter "ids":
    read for the k hits only, as plain rows, the statement built once per database."""
    return select(*MemoryOut.columns()).where(of_ids(postgres))
