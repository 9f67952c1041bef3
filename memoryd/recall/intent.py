"""What a question's words say it wants, beyond its topic (seed 004: recall that adapts
to the question). Rules, each measured by bench/extraction.py's recall@1:

- a question that names a subject key's slot ("who is my manager?") wants the memories
  of every key that names it ("team lead", "组长"), found by key even when none of their
  words is the question's; recall ranks them first among its matches (rank.py);
- a question about the present ("where does she live now?", "现在住哪") wants the newest
  active value of a subject key: where two active memories of one key compete (a change
  not yet reconciled, a list-like key), the newest said takes the best place the key's
  memories hold among the hits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from memoryd.memories.synonyms import asked_slot_keys
from memoryd.models.tables import Memory
from memoryd.recall.search import LIST_LIMIT, SCORING_COLUMNS

_PRESENT = re.compile(
    r"\b(?:now|currently|current|these days|nowadays|at the moment|at present|still|today)\b"
    r"|现在|目前|如今|眼下|最近|当前",
    re.IGNORECASE,
)
# The hits reordered: past these, a memory's place does not change what a caller reads.
WINDOW = 30
_KEYS = select(Memory.id, Memory.name_key, Memory.said_at, Memory.created_at).where(
    Memory.id.in_(bindparam("ids", expanding=True))
)

Scored = list[tuple[float, int, dict[str, float]]]


def key_rows(session: Session, where: list[Any], terms: Sequence[str]) -> list[Any]:
    """SCORING_COLUMNS of the active memories stored under a key of a slot the question
    names (the partial index on the scope's keys)."""
    keys = asked_slot_keys(frozenset(terms))
    if not keys:
        return []
    read = select(*SCORING_COLUMNS).where(*where, Memory.name_key.in_(keys)).limit(LIST_LIMIT)
    return list(session.connection().execute(read).all())


def asks_about_now(query: str) -> bool:
    return bool(_PRESENT.search(query))


def newest_value_first(session: Session, top: Scored) -> Scored:
    """`top` with each subject key's memories, within the first WINDOW, in the places
    they held, newest said first."""
    head, tail = top[:WINDOW], top[WINDOW:]
    rows = session.connection().execute(_KEYS, {"ids": [mid for _, mid, _ in head]})
    said: dict[int, tuple[str, datetime]] = {
        r.id: (r.name_key, r.said_at or r.created_at) for r in rows if r.name_key
    }
    places: dict[str, list[int]] = {}
    for place, (_score, mid, _signals) in enumerate(head):
        if mid in said:
            places.setdefault(said[mid][0], []).append(place)
    reordered = list(head)
    for key_places in places.values():
        items = sorted(
            (head[p] for p in key_places), key=lambda item: said[item[1]][1], reverse=True
        )
        for place, item in zip(key_places, items, strict=True):
            reordered[place] = item
    return reordered + tail
