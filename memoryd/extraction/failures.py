"""A failed extraction batch, recorded by kind: an outage (transient) gives the turns
back unchanged and backs the session off; a permanent error or a bug splits a batch of
several turns so only the turn that fails alone counts attempts and is dead-lettered."""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import update
from sqlalchemy.orm import Session

from memoryd.errors import log_failure
from memoryd.ingest.leases import (
    Claim,
    back_off,
    end_split,
    release_lease,
    return_turns,
    split_failed,
)
from memoryd.llm import circuit
from memoryd.models.coordination import database_time
from memoryd.models.db import session_scope
from memoryd.models.tables import BatchStatus, ExtractionBatch, FailureKind
from memoryd.settings import ExtractionSettings, Settings

log = logging.getLogger(__name__)


def fail_batch(
    session: Session,
    settings: ExtractionSettings,
    claim: Claim,
    kind: FailureKind,
    error: str,
    now: datetime,
    llm_down: bool = False,
) -> int:
    """Record a failed batch and give its turns back. Returns how many were dead-lettered.

    Transient: the turns return unchanged and the session backs off (and with `llm_down`
    the LLM circuit counts the failure). Permanent or bug: a batch of several turns is
    split (leases.split_failed), so only the turn that fails alone counts attempts and
    is dead-lettered; the others are extracted.
    """
    if not release_lease(session, claim):
        return 0  # the lease was lost: its turns went back already
    transient = kind == FailureKind.TRANSIENT
    counted = not transient and not split_failed(session, claim)
    dead = return_turns(session, settings, claim.key, claim.batch_id, count_attempt=counted)
    if dead:
        end_split(session, claim.key)
    if transient:
        back_off(session, settings, claim.key, database_time(session))
        if llm_down:
            circuit.record_failure(session, settings, database_time(session))
    session.execute(
        update(ExtractionBatch)
        .where(ExtractionBatch.id == claim.batch_id)
        .values(status=BatchStatus.FAILED, error=error[:2000], error_kind=kind, finished_at=now)
    )
    return dead


def record_failure(
    settings: Settings,
    claim: Claim,
    kind: FailureKind,
    error: str,
    now: datetime,
    llm_down: bool = False,
) -> int | None:
    """fail_batch in a transaction of its own: how many turns were dead-lettered, or
    None when even that failed (database down): the lease then runs out and the sweeper
    returns the turns, so nothing is lost either way."""
    try:
        with session_scope(settings.storage) as session:
            dead = fail_batch(session, settings.extraction, claim, kind, error, now, llm_down)
    except Exception as exc:
        log_failure(log, f"could not record the failure of batch {claim.batch_id}", exc)
        return None
    if dead:
        log.error(
            "%d turns of %s dead-lettered after %d attempts; `memoryd retry` re-drives them",
            dead,
            claim.key,
            settings.extraction.max_attempts,
        )
    return dead
