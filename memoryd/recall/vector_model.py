"""Which embedding model the stored vectors came from, one record for the deployment.

Two models can give vectors of one size and unrelated meaning (MiniLM and e5: 384
dimensions each), so a vector is only compared with a question embedded by the model
that wrote it. The fill records the model it embeds with (backfill.py, under its
deployment-wide lock). A fill under another model (MEMORYD_EMBEDDING_MODEL changed)
first drops every stored vector, then embeds them again; until then recall leaves the
embedding list out and finds by keyword, subject and trigram. Vectors stored before
the record existed are taken as the first recording model's, as they always were.
"""

from __future__ import annotations

import logging

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from memoryd.memo import RecentMemo
from memoryd.models.db import session_scope, utcnow
from memoryd.models.tables import Memory, VectorModel
from memoryd.settings import Settings

log = logging.getLogger(__name__)

RECORD_ID = 1
# How long a process trusts what it last read of the record: a fill under a new model
# elsewhere is seen by recall within this time.
RECHECK_SECONDS = 30.0
_seen: RecentMemo[bool] = RecentMemo(seconds=RECHECK_SECONDS, size=64)


def model_name(settings: Settings) -> str:
    """The model as the record names it: provider and model, not the endpoint's URL (a
    model moved to another server embeds as before)."""
    return f"{settings.recall.embedding_provider}:{settings.recall.embedding_model}"


def recorded(session: Session) -> str | None:
    return session.scalar(select(VectorModel.model).where(VectorModel.id == RECORD_ID))


def vectors_match(session: Session, settings: Settings) -> bool:
    """Whether the stored vectors came from this settings' model (or from before any
    record), read at most every RECHECK_SECONDS per process."""
    key = (settings.storage.resolved_database_url, model_name(settings))
    known = _seen.get(key)
    if known is None:
        found = recorded(session)
        known = found is None or found == model_name(settings)
        _seen.put(key, known)
    return known


def drop_vectors(session: Session) -> int:
    """Drop every vector, so the next fill embeds them all, and try again memories an
    earlier model refused. Returns how many vectors were dropped."""
    session.execute(update(Memory).where(Memory.embed_failures > 0).values(embed_failures=0))
    result = session.execute(
        update(Memory)
        .where(Memory.vector.is_not(None))
        .values(vector=None, vector_version=Memory.vector_version + 1)
    )
    return int(getattr(result, "rowcount", 0) or 0)


def follow_model(settings: Settings) -> int:
    """Record this settings' model as the stored vectors'; when the record named another,
    drop every vector first. Returns how many were dropped. Called by the fill alone."""
    name = model_name(settings)
    with session_scope(settings.storage, readonly=True) as session:
        if recorded(session) == name:
            return 0  # the common case takes no write lock
    with session_scope(settings.storage) as session:
        found = recorded(session)
        if found == name:
            return 0  # another fill recorded it meanwhile
        dropped = drop_vectors(session) if found is not None else 0
        record = session.get(VectorModel, RECORD_ID)
        if record is None:
            session.add(VectorModel(id=RECORD_ID, model=name, recorded_at=utcnow()))
        else:
            record.model, record.recorded_at = name, utcnow()
    if found is not None:
        log.warning(
            "the embedding model changed from %s to %s: %d vectors dropped, embedding again",
            found,
            name,
            dropped,
        )
    _seen.clear()
    return dropped


def model_changed(settings: Settings) -> bool:
    """Whether the record names another model than this settings' (a fill is due)."""
    with session_scope(settings.storage, readonly=True) as session:
        found = recorded(session)
    return found is not None and found != model_name(settings)
