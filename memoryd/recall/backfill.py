"""Giving memories their vectors, off the chat path and on the `embedding` queue.

A memory without a vector waits for the next fill: the one queued after a task that
wrote memories, or beat's sweep when any memory waits. One fill runs at a time in the
whole deployment; the model runs with no transaction open. An endpoint that is down or
misconfigured (unreachable, 5xx, a bad key, an unknown model) stops the fill and blames
no memory: the next one tries again. An endpoint that refuses a request (a text too long
for the model) is asked row by row, so one refused memory never keeps the others
waiting, and a memory refused `embedding_max_attempts` times is left out until its text
changes (`memoryd embed`, `/v1/stats` and the page count those). After a model change,
beat's fills embed again, memory by memory, the vectors the other model wrote
(vector_model.py); nothing is dropped first.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from sqlalchemy import and_, case, func, not_, select, update
from sqlalchemy.engine import Row
from sqlalchemy.orm import Session
from sqlalchemy.sql import ColumnElement

from memoryd.errors import ConfigError, LLMEndpointError, LLMTransientError
from memoryd.models.base import written_in
from memoryd.models.coordination import LOCK_CLASS_EMBEDDING, single_flight
from memoryd.models.db import session_scope
from memoryd.models.keys import Scope
from memoryd.models.tables import Memory, MemoryStatus
from memoryd.recall import vector_model
from memoryd.recall.embedders import MAX_INPUT_CHARS, Vectors, embedder, to_bytes
from memoryd.settings import RecallSettings, Settings, StorageSettings

log = logging.getLogger(__name__)

FILL_CHUNK = 64
PROBE = "memory"  # what every embedding model takes
Pending = Row[int, str, str, int]  # (id, name, content, vector_version) of one to embed


class _EndpointDown(Exception):
    """The endpoint is unreachable or misconfigured: no row is to blame."""


@dataclass
class Coverage:
    embedded: int = 0  # active memories with a vector
    waiting: int = 0  # without one, still to be tried
    refused: int = 0  # without one, refused embedding_max_attempts times
    other_model: int = 0  # with another model's, which beat's fills embed again

    @property
    def missing(self) -> int:
        return self.waiting + self.refused


def embedded_text(name: str, content: str) -> str:
    title = name.strip()
    text = content if not title or content.startswith(title) else f"{title}: {content}"
    return text[:MAX_INPUT_CHARS]


def fill_missing(
    settings: Settings,
    scope: Scope | None = None,
    limit: int = 512,
    other_models: bool = False,
) -> int:
    """Embed up to `limit` active memories that have no vector yet or, with
    `other_models` (beat's fills), one another model wrote, each tried at most once per
    call. Returns how many were filled; no-op unless embeddings are on."""
    if not settings.embeddings_on:
        return 0
    with single_flight(settings.storage, LOCK_CLASS_EMBEDDING, "fill") as alone:
        # Another fill is walking the same rows: two would embed them twice and count
        # a refusal twice in one round.
        return _fill(settings, scope, limit, other_models) if alone else 0


def _fill(settings: Settings, scope: Scope | None, limit: int, other_models: bool) -> int:
    with session_scope(settings.storage, readonly=True) as session:
        # Read, not remembered: another process may have recorded this model meanwhile.
        model_id = vector_model.known_id(session, settings, fresh=True)
        passes = _passes(session, settings, model_id, other_models)
    filled, tried = 0, 0
    for replacing, where in passes:
        after = 0
        while tried < limit:
            rows = _unembedded(settings, scope, where, after, min(FILL_CHUNK, limit - tried))
            if not rows:
                break
            after, tried = rows[-1].id, tried + len(rows)
            try:
                vectors = _embed_rows(settings, rows)
            except _EndpointDown as exc:
                log.warning("embedding %d memories failed, next fill retries: %s", len(rows), exc)
                return filled
            if model_id is None:  # named once it has answered: a mistyped one is not
                model_id = vector_model.fill_id(settings)
            filled += _store(settings.storage, rows, vectors, model_id, replacing)
    if model_id is not None:
        vector_model.adopt_unnamed(settings, model_id)
    return filled


Pass = tuple[bool, list[ColumnElement[bool]]]  # (replacing another model's, the rows)


def _passes(
    session: Session, settings: Settings, model_id: int | None, other_models: bool
) -> list[Pass]:
    """What each pass of a fill walks: memories without a vector, then with
    `other_models` the vectors each other model wrote, model by model over an index."""
    passes: list[Pass] = [(False, _waiting(settings.recall, model_id))]
    if other_models:
        others = vector_model.other_ids(session, settings, model_id)
        passes += [(True, _written_by(settings.recall, other)) for other in others]
    return passes


def _refused(settings: RecallSettings, model_id: int | None) -> ColumnElement[bool]:
    """Refused for good by this model: refusals count per model (the last refuser is
    vector_model_id of a memory without a vector), so another model tries afresh."""
    return and_(
        Memory.embed_failures >= settings.embedding_max_attempts,
        Memory.vector_model_id.is_not_distinct_from(model_id),
    )


def _waiting(settings: RecallSettings, model_id: int | None) -> list[ColumnElement[bool]]:
    return [
        Memory.vector.is_(None),
        Memory.status == written_in(MemoryStatus.ACTIVE),
        not_(_refused(settings, model_id)),
    ]


def _written_by(settings: RecallSettings, model_id: int | None) -> list[ColumnElement[bool]]:
    """Active memories whose vector that model wrote (None: before models were named)."""
    return [
        Memory.vector.is_not(None),
        Memory.status == written_in(MemoryStatus.ACTIVE),
        Memory.vector_model_id.is_(None)
        if model_id is None
        else Memory.vector_model_id == model_id,
    ]


def any_waiting(settings: Settings) -> bool:
    """Whether any memory waits for a vector, or for one of this model in place of
    another's: beat sends a fill only then."""
    with session_scope(settings.storage, readonly=True) as session:
        model_id = vector_model.known_id(session, settings)
        for _replacing, where in _passes(session, settings, model_id, other_models=True):
            if session.scalar(select(Memory.id).where(*where).limit(1)) is not None:
                return True
    return False


def _unembedded(
    settings: Settings,
    scope: Scope | None,
    where: list[ColumnElement[bool]],
    after: int,
    size: int,
) -> list[Pending]:
    with session_scope(settings.storage, readonly=True) as session:
        stmt = select(Memory.id, Memory.name, Memory.content, Memory.vector_version).where(
            *where, Memory.id > after
        )
        if scope is not None:
            stmt = stmt.where(Memory.of(scope))
        return list(session.execute(stmt.order_by(Memory.id).limit(size)).all())


def _embed(settings: Settings, texts: list[str]) -> Vectors:
    try:
        return embedder(settings).embed(texts)
    except (LLMTransientError, LLMEndpointError, ConfigError) as exc:
        raise _EndpointDown(str(exc)) from exc


def _embed_rows(
    settings: Settings, rows: list[Pending], nested: bool = False
) -> list[Vectors | None]:
    """A vector per row, None for a row the endpoint refused (asked one by one once the
    whole chunk was refused). When it refuses every row, a short probe text tells a
    fault of the endpoint (nobody is blamed; a mistyped model name that a server answers
    with a 400) from the texts'."""
    texts = [embedded_text(r.name, r.content) for r in rows]
    try:
        return list(_embed(settings, texts))
    except (_EndpointDown, SoftTimeLimitExceeded):
        raise
    except Exception as exc:  # any refusal, whatever the provider raises
        refusal = exc
    if len(rows) == 1:
        log.warning("embedding memory %d refused: %s", rows[0].id, refusal)
        vectors: list[Vectors | None] = [None]
        if nested:
            return vectors
    else:
        vectors = [v for row in rows for v in _embed_rows(settings, [row], nested=True)]
    if all(v is None for v in vectors):
        try:
            _embed(settings, [PROBE])
        except (_EndpointDown, SoftTimeLimitExceeded):
            raise
        except Exception as exc:
            raise _EndpointDown(f"every one of {len(rows)} memories refused: {exc}") from exc
    return vectors


def _store(
    settings: StorageSettings,
    rows: list[Pending],
    vectors: list[Vectors | None],
    model_id: int,
    replacing: bool,
) -> int:
    """Write each row's vector (or count its refusal), only where the memory is as read:
    an edit meanwhile changed its text, another fill its vector_version. The version
    tells every process's scope cache that a vector is new. A refused memory that held
    another model's vector loses it (this model never compares it) and waits as any
    memory without one; its refusals are this model's."""
    filled = 0
    refusals = case((Memory.vector_model_id == model_id, Memory.embed_failures + 1), else_=1)
    with session_scope(settings) as session:
        for row, vector in zip(rows, vectors, strict=True):
            unchanged = (
                Memory.id == row.id,
                Memory.vector_version == row.vector_version,
                Memory.name == row.name,
                Memory.content == row.content,
            )
            values: dict[str, Any] = {"vector_model_id": model_id}
            if vector is not None:
                values.update(vector=to_bytes(vector), embed_failures=0)
                values["vector_version"] = Memory.vector_version + 1
                filled += 1
            elif replacing:
                values.update(vector=None, embed_failures=1)
                values["vector_version"] = Memory.vector_version + 1
            else:
                values["embed_failures"] = refusals
            session.execute(update(Memory).where(*unchanged).values(**values))
    return filled


def reset_vectors(settings: StorageSettings) -> int:
    """Drop every vector (`memoryd embed --reset`); the next fill re-embeds them all, and
    memories an earlier model refused are tried again. A model change needs no reset:
    the fill embeds again what another model wrote (vector_model.py)."""
    with session_scope(settings) as session:
        session.execute(update(Memory).where(Memory.embed_failures > 0).values(embed_failures=0))
        result = session.execute(
            update(Memory)
            .where(Memory.vector.is_not(None))
            .values(vector=None, vector_version=Memory.vector_version + 1)
        )
        return int(getattr(result, "rowcount", 0) or 0)


def coverage(settings: Settings, session: Session | None = None, embedded: bool = True) -> Coverage:
    """How many active memories have a vector (unless `embedded` is False: that count
    grows with the store), wait for one, were refused for good, or hold another model's
    vector (while no model is recorded, those from before models were named count as
    this one's); each count over a partial index."""
    if session is None:
        with session_scope(settings.storage, readonly=True) as own:
            return coverage(settings, own, embedded)
    active = Memory.status == written_in(MemoryStatus.ACTIVE)
    unembedded = (active, Memory.vector.is_(None))
    model_id = vector_model.known_id(session, settings)
    refused = _refused(settings.recall, model_id)

    def count(*where: ColumnElement[bool]) -> int:
        return int(session.scalar(select(func.count()).select_from(Memory).where(*where)) or 0)

    missing = count(*unembedded)
    refused_count = count(*unembedded, refused) if missing else 0
    others = vector_model.other_ids(session, settings, model_id)
    return Coverage(
        embedded=count(active, Memory.vector.is_not(None)) if embedded else 0,
        waiting=missing - refused_count,
        refused=refused_count,
        other_model=sum(count(*_written_by(settings.recall, other)) for other in others),
    )
