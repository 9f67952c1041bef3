"""What the user just said, before it is a memory: recall and the context block also
search the scope's user turns not yet extracted (pending or claimed) and return those
that match as provisional hits, marked `pending`.

A turn's facts become memories in the same transaction that marks it done, and recall
reads the turns and the memories in one snapshot (flow._read): a turn is shown either
here or through the memories it produced, never both and never neither; dead-lettered,
skipped and erased turns are never read. Matching is by keyword (the query's own search
terms: stems at a word's start, Chinese characters and pairs), by word trigrams and by
subject key (_Match) over the newest PENDING_SCAN turns of the scope (the first
PENDING_CHARS of each), read through the partial indexes of pending and claimed turns.
When embeddings are on, the one turn nearest the question in meaning also counts, at
MEANING_SHARE; the turns are embedded by embed_pending before the recall's transaction
opens, so no transaction waits on the model. Cosines do not tell a turn that answers
from one that does not (the user's turns of one conversation all score alike), but the
nearest one is the answer more often than chance, and a few answers no word finds are
found that way (`bench/pending_match.py` measures each path). Secrets and the question
itself are never shown back. A pending hit's `id` is its turn's id negated: no memory has it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Subquery, select, union_all
from sqlalchemy.orm import Session

from memoryd.memo import RecentMemo
from memoryd.memories.fact_rules import slots_told
from memoryd.memories.subjects import subject_key
from memoryd.memories.synonyms import asked_slot_keys, slot_name
from memoryd.models.base import TurnStatus, scope_params, written_in, written_limit
from memoryd.models.conversation_tables import Turn
from memoryd.models.db import session_scope
from memoryd.models.keys import Scope
from memoryd.recall.embedders import Vectors
from memoryd.recall.embeddings import embed_texts, known_vectors
from memoryd.recall.hits import Hit, ScoreParts
from memoryd.recall.trigrams import TrigramShare
from memoryd.settings import RecallSettings, Settings
from memoryd.text import content_words, holds_secret, last_line

PENDING_SCAN = 50  # the newest unextracted user turns a recall reads
PENDING_CHARS = 500  # of each, the beginning is matched: a backlog must not slow recall
PENDING_CATEGORY = "pending"
# A turn found by meaning alone ranks as half a keyword match: below the turns whose
# words answer, and below the memories that match well.
MEANING_SHARE = 0.5

_COLUMNS = (Turn.id, Turn.agent_id, Turn.user_id, Turn.turn_key, Turn.content, Turn.created_at)


def _newest_of(status: TurnStatus) -> Subquery:
    """The scope's newest user turns of one status, the status written in the text."""
    return (
        select(*_COLUMNS)
        .where(Turn.of_bound(), Turn.status == written_in(status), Turn.role == "user")
        .order_by(Turn.id.desc())
        .limit(written_limit(PENDING_SCAN))
        .subquery()
    )


# One read per status, joined, and the limit written in: by its generic plan (prepared,
# the read is planned once for every scope) each keeps to its status's small partial
# index. Once pending turns were a few tenths of the table (a backlog, an import),
# `pending OR claimed` walked every turn the user ever sent, and a limit sent as a
# parameter every turn of the table (tests/recall/test_plans.py). Built once: every
# recall reads it.
_UNEXTRACTED = union_all(
    select(*_newest_of(TurnStatus.PENDING).c), select(*_newest_of(TurnStatus.CLAIMED).c)
).subquery()
_NEWEST_UNEXTRACTED = (
    select(*_UNEXTRACTED.c).order_by(_UNEXTRACTED.c.id.desc()).limit(written_limit(PENDING_SCAN))
)


def pending_hits(
    session: Session,
    settings: Settings,
    scope: Scope,
    query: str,
    k: int,
    vector: Vectors | None,
    terms: Sequence[str],
) -> list[Hit]:
    """The scope's unextracted user turns that match `query`, best first (how well, then
    newest), at most `k`; with the query's `vector`, the one nearest in meaning too.
    `terms` are the query's search terms (text.query_tokens)."""
    if not terms or k <= 0 or not settings.agent.recall_pending:
        return []
    rows = _readable(session, scope, query)
    if not rows:  # most scopes most of the time: no matcher to build
        return []
    match, nearest = (
        _Match(settings.recall, query, terms),
        _nearest_in_meaning(settings, vector, rows),
    )
    scored = []
    for row in rows:
        share = match(row.id, row.content[:PENDING_CHARS])
        if share == 0 and row.id == nearest:
            share = MEANING_SHARE
        if share > 0:
            scored.append((share, row))
    scored.sort(key=lambda item: (-item[0], -item[1].id))
    return [_hit(settings.recall, row, share) for share, row in scored[:k]]


def embed_pending(
    settings: Settings,
    scope: Scope,
    query: str,
    vector: Vectors | None,
    terms: Sequence[str],
) -> bool | None:
    """Embed the scope's unextracted turns not yet embedded, read in a statement of its
    own before the recall's: pending_hits then finds their vectors known. `terms` as
    pending_hits'. Whether there were any to show, or None when it did not look: with
    none, the recall need not read them again, since a turn sent before the recall began
    was among them or, already extracted, is among the memories it reads."""
    if vector is None or not settings.agent.recall_pending or not terms:
        return None
    with session_scope(settings.storage, readonly=True, autocommit=True) as session:
        rows = _readable(session, scope, query)
    embed_texts(settings, _texts(rows))
    return bool(rows)


def _readable(session: Session, scope: Scope, query: str) -> list[Any]:
    """The scope's newest unextracted user turns, but for the question itself (the turn
    just sent; of a dialogue, its last line) and secrets, which extraction would never
    keep: never shown back."""
    asked = {_plain(text) for text in (query, last_line(query)) if text}
    return [
        row
        for row in session.connection().execute(_NEWEST_UNEXTRACTED, scope_params(scope))
        if _plain(row.content) not in asked and not holds_secret(row.content)
    ]


def _texts(rows: Sequence[Any]) -> dict[int, str]:
    return {row.id: row.content[:PENDING_CHARS] for row in rows}


def _nearest_in_meaning(
    settings: Settings, vector: Vectors | None, rows: Sequence[Any]
) -> int | None:
    """The id of the turn nearest the query's `vector` among those already embedded, at
    least embedding_min_similarity; None without a vector."""
    if vector is None or not rows:
        return None
    vectors = known_vectors(settings, _texts(rows))
    best = max(
        ((float(v @ vector), row_id) for row_id, v in vectors.items() if v.shape == vector.shape),
        default=None,
    )
    return best[1] if best and best[0] >= settings.recall.embedding_min_similarity else None


class _Match:
    """How well a turn's text matches the query, 0 to 1, by the paths recall searches
    memories with: the share of the query's search terms it holds; the share of the
    query's word trigrams (misspellings, other inflections), from the least similarity
    that counts; and the subject key, as the offline rules read the turn: "I just moved
    to Porto" tells the home city that "where does ann live now?" asks about."""

    def __init__(self, settings: RecallSettings, query: str, terms: Sequence[str]) -> None:
        self.terms = set(terms)
        self.keywords = _matcher(self.terms)
        self.trigrams = TrigramShare(content_words(query[:1000]))
        self.least = settings.recall_min_similarity
        self.slots = {slot_name(key) for key in asked_slot_keys(frozenset(terms))}

    def __call__(self, turn_id: int, text: str) -> float:
        if self.slots and self.slots & _told_slots(turn_id, text):
            return 1.0
        found = {m.group() for m in self.keywords.finditer(text.casefold())}
        share = len(found) / len(self.terms)
        similar = self.trigrams.uncached(text)
        return max(share, similar if similar >= self.least else 0.0)


# The slots each turn tells (a turn is read again at each recall of its scope until it
# is extracted), by turn id and a hash of its text: slot names only, so no text a user
# said stays in this process after an erasure.
_slots_told: RecentMemo[frozenset[str]] = RecentMemo(seconds=3600, size=4096)


def _told_slots(turn_id: int, text: str) -> frozenset[str]:
    """The subject keys whose value the offline rules read in a turn."""
    key = (turn_id, hash(text))
    found = _slots_told.get(key)
    if found is None:
        found = frozenset(slot_name(subject_key(name)) for name in slots_told(text))
        _slots_told.put(key, found)
    return found


def _hit(settings: RecallSettings, row: Any, share: float) -> Hit:
    parts = ScoreParts(
        keyword_rank=None, similarity=0.0, embedding=None, fused=round(share, 6),
        strength=0.0, recency=1.0, confidence=1.0,
    )  # fmt: skip
    score = (
        settings.rank_weight_match * share
        + settings.rank_weight_recency
        + settings.rank_weight_confidence
    )
    return Hit(
        id=-row.id, agent_id=row.agent_id, user_id=row.user_id, category=PENDING_CATEGORY,
        tier="", status=TurnStatus.PENDING.value, name="", content=row.content, tags=[],
        confidence=1.0, evidence_count=0, access_count=0, created_at=row.created_at,
        updated_at=row.created_at, expires_at=None, supersedes_id=None,
        superseded_by_id=None, metadata=None, said_at=row.created_at, score=round(score, 6),
        parts=parts, pending=True, turn_key=row.turn_key,
    )  # fmt: skip


def merged(hits: Sequence[Hit], pending: Sequence[Hit], k: int | None) -> list[Hit]:
    """Memories in their recalled order (reranked, intent-ordered), each pending turn
    placed before the first memory it outscores; at most `k` (all when None)."""
    out: list[Hit] = []
    waiting = sorted(pending, key=lambda h: -h.score)
    for hit in hits:
        while waiting and waiting[0].score > hit.placed_by:
            out.append(waiting.pop(0))
        out.append(hit)
    out += waiting
    return out if k is None else out[:k]


def _matcher(terms: set[str]) -> re.Pattern[str]:
    """The query's search terms as one pattern over a turn's casefolded text: a Latin
    stem at a word's start ("move" in "moved"; "citi" as "cit", in "city"), other terms
    (Chinese characters and pairs) anywhere. One regular expression per turn instead of
    tokenising each: a backlog of long turns must not slow recall."""
    latin = {t[:-1] if t.endswith("i") and len(t) > 3 else t for t in terms if t.isascii()}
    other = {t for t in terms if not t.isascii()}
    parts = []
    if latin:
        parts.append(
            r"\b(?:" + "|".join(sorted(map(re.escape, latin), key=len, reverse=True)) + ")"
        )
    if other:
        parts.append("(?:" + "|".join(sorted(map(re.escape, other), key=len, reverse=True)) + ")")
    return re.compile("|".join(parts))


def _plain(text: str) -> str:
    return " ".join(text.casefold().split())
