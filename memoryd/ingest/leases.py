"""Batch claims under a per-session lease: claim, renew, finish, fail, recover.

The rules, the same on PostgreSQL and SQLite:
- A session has at most one extraction lease, naming one batch, until `lease_until` on
  the database's clock (the mechanism, shared with compression: session_lease.py). A
  claimer first locks the session row (SELECT … FOR UPDATE; SQLite's BEGIN IMMEDIATE),
  so claims, returns and finishes of one session never interleave.
- A claimed turn is alive exactly while its session's lease names its batch and has not
  expired. Any other claimed turn is stranded (its worker died or hung): the next claim
  of its session, or the next sweep, returns it to pending before anything else.
- A claim is built from the rows its UPDATE took, never from an earlier read.
- Only the batch named by the lease may finish or return its turns. Returning stranded
  turns clears the lease in the same transaction, so a batch that outlived its lease can
  never write its result afterwards.
- Outages (transient LLM failures) never count toward `max_attempts`: the turns go back
  as they were and the session backs off. Permanent failures and bugs count.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import case, func, select, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from memoryd.ingest.session_lease import EXTRACTION_LEASE
from memoryd.models.base import written_in
from memoryd.models.db import rowcount
from memoryd.models.dialect import for_update, greatest
from memoryd.models.keys import SessionKey, session_pk, turn_session, turns_of
from memoryd.models.tables import BatchStatus, ChatSession, ExtractionBatch, Turn, TurnStatus
from memoryd.settings import ExtractionSettings, MaintenanceSettings

log = logging.getLogger(__name__)

TurnCost = Callable[[str, str], int]  # (role, content) -> tokens the turn takes in a prompt


@dataclass(frozen=True)
class ClaimedTurn:
    id: int
    role: str
    content: str
    created_at: datetime


@dataclass(frozen=True)
class Claim:
    key: SessionKey
    batch_id: int
    turns: list[ClaimedTurn]
    # The first turn alone is over the token budget: the extractor must cut it.
    oversized: bool = False


# ---------------------------------------------------------------------------------- claim


def lock_session(session: Session, key: SessionKey) -> ChatSession | None:
    """The session row, locked until the transaction ends (SQLite: the write lock is held
    from BEGIN IMMEDIATE)."""
    # populate_existing: a copy of the row this session loaded earlier may be stale.
    stmt = select(ChatSession).where(*session_pk(key)).execution_options(populate_existing=True)
    return session.scalars(for_update(session, stmt)).first()


def claim_batch(
    session: Session,
    settings: ExtractionSettings,
    key: SessionKey,
    now: datetime,
    *,
    token_budget: int | None = None,
    cost: TurnCost | None = None,
) -> Claim | None:
    """Take the session's lease and its oldest pending turns, or return None.

    Stranded turns of the session go back to pending first (and stay so even when
    nothing is claimed: the caller commits). A full batch is claimed whenever one is
    waiting; a partial one only when the session has ended or been idle for
    `flush_idle_seconds`. With `token_budget`, the batch takes the oldest turns whose
    `cost` fits; a first turn over the budget alone is claimed alone, `oversized`.
    """
    chat = lock_session(session, key)
    if chat is None or EXTRACTION_LEASE.is_live(chat, now):
        return None
    recover_stranded(session, settings, chat, now)
    if chat.retry_at is not None and chat.retry_at > now:
        return None  # backing off after an outage
    rows, splitting = _within_split(chat, _pending_turns(session, settings, key))
    taken, oversized = _fit(rows, token_budget, cost)
    full = splitting or _full(settings, rows, taken)
    if not taken or not _ready(settings, chat, full=full, now=now):
        return None
    batch = open_batch(session, key, "extract", [t.id for t in taken], now)
    turns = _mark_claimed(session, batch, taken)
    if not turns:  # cannot happen under the session lock; never claim an empty batch
        session.delete(batch)
        return None
    batch.turn_count = len(turns)
    # Under the row lock the lease is free (checked above): taken on the loaded row.
    for column, value in EXTRACTION_LEASE.taken_by(settings, batch.id, now).items():
        setattr(chat, column, value)
    session.flush()
    return Claim(key, batch.id, turns, oversized and len(turns) == 1)


def _pending_turns(
    session: Session, settings: ExtractionSettings, key: SessionKey
) -> list[ClaimedTurn]:
    """The session's oldest pending turns, a batch's worth at most."""
    rows = session.execute(
        select(Turn.id, Turn.role, Turn.content, Turn.created_at)
        .where(*turns_of(key), Turn.status == written_in(TurnStatus.PENDING))
        .order_by(Turn.id)
        .limit(settings.batch_size)
    )
    return [ClaimedTurn(*row) for row in rows]


def _within_split(chat: ChatSession, rows: list[ClaimedTurn]) -> tuple[list[ClaimedTurn], bool]:
    """What a claim may take of `rows` while the session isolates a failing turn (see
    split_failed): at most split_limit of the turns up to split_until, at once. Once the
    oldest pending turn is past that range, the split is over."""
    if chat.split_until is None:
        return rows, False
    if rows and rows[0].id <= chat.split_until:
        within = [row for row in rows if row.id <= chat.split_until]
        return within[: chat.split_limit or 1], True
    chat.split_limit = chat.split_until = None
    return rows, False


def _full(settings: ExtractionSettings, rows: list[ClaimedTurn], taken: list[ClaimedTurn]) -> bool:
    """Whether the batch is as large as it can be: batch_size turns, or cut by the budget."""
    return len(rows) == settings.batch_size or len(taken) < len(rows)


def _ready(settings: ExtractionSettings, chat: ChatSession, *, full: bool, now: datetime) -> bool:
    """A full batch goes at once; a partial one when the session ended or went idle."""
    idle = chat.last_activity_at <= now - timedelta(seconds=settings.flush_idle_seconds)
    return full or chat.ended_at is not None or idle


def open_batch(
    session: Session, key: SessionKey, kind: str, turn_ids: Sequence[int], now: datetime
) -> ExtractionBatch:
    """The running batch row of a claim over `turn_ids` (oldest first): an extraction
    ("extract") or a compression run ("compress"), whose lease names it."""
    batch = ExtractionBatch(
        agent_id=key.agent_id,
        user_id=key.user_id,
        session_id=key.session_id,
        kind=kind,
        status=BatchStatus.RUNNING,
        first_turn_id=turn_ids[0],
        last_turn_id=turn_ids[-1],
        turn_count=len(turn_ids),
        started_at=now,
    )
    session.add(batch)
    session.flush()
    return batch


def _mark_claimed(
    session: Session, batch: ExtractionBatch, taken: list[ClaimedTurn]
) -> list[ClaimedTurn]:
    """The taken turns, claimed for `batch`: those still pending, in order."""
    took = set(
        session.scalars(
            update(Turn)
            .where(Turn.id.in_([r.id for r in taken]), Turn.status == TurnStatus.PENDING)
            .values(status=TurnStatus.CLAIMED, batch_id=batch.id)
            .returning(Turn.id)
        )
    )
    return [t for t in taken if t.id in took]


def _fit(
    rows: list[ClaimedTurn], budget: int | None, cost: TurnCost | None
) -> tuple[list[ClaimedTurn], bool]:
    """The longest prefix of `rows` whose cost fits `budget` (at least one row), and
    whether that one row alone is over it."""
    if budget is None or cost is None or not rows:
        return rows, False
    used, taken = 0, list[ClaimedTurn]()
    for row in rows:
        tokens = cost(row.role, row.content)
        if taken and used + tokens > budget:
            break
        taken.append(row)
        used += tokens
    return taken, used > budget


# ------------------------------------------------------------------------- batch outcome


def release_lease(session: Session, claim: Claim) -> bool:
    """Give the lease back; False means it was lost meanwhile (another claim or the
    sweeper returned our turns), and the caller must write nothing."""
    return EXTRACTION_LEASE.release(session, claim.key, claim.batch_id)


def finish_turns(session: Session, settings: MaintenanceSettings, claim: Claim) -> int:
    """The batch was applied: its turns are done, the session's back-off is over, and
    it is marked for compression if it has grown past the trigger. Returns how many
    turns."""
    res = session.execute(
        update(Turn)
        .where(Turn.batch_id == claim.batch_id, Turn.status == TurnStatus.CLAIMED)
        .values(status=TurnStatus.DONE)
    )
    done = rowcount(res)
    session.execute(
        update(ChatSession)
        .where(*session_pk(claim.key))
        .values(
            pending_count=_less_pending(session, done),
            compress_due=compress_due(settings, func.coalesce(ChatSession.summary_upto, 0)),
            transient_failures=0,  # a batch went through: no back-off left
            retry_at=None,
        )
    )
    return done


def compress_due(settings: MaintenanceSettings, summarised_upto: Any) -> ColumnElement[bool]:
    """For an UPDATE of sessions: whether the session's turns after `summarised_upto`
    hold more than compress_trigger_tokens. Read through the session's index of turns,
    which compression keeps short."""
    unsummarised = (
        select(func.coalesce(func.sum(Turn.token_count), 0))
        .where(turn_session(), Turn.id > summarised_upto)
        .scalar_subquery()
    )
    return unsummarised > settings.compress_trigger_tokens


def return_turns(
    session: Session,
    settings: ExtractionSettings,
    key: SessionKey,
    batch_id: int,
    *,
    count_attempt: bool,
) -> int:
    """A batch failed: its turns go back to pending. With `count_attempt` (a permanent
    failure or a bug) each gets one more attempt, or goes to `failed` (kept, re-drivable)
    on reaching `max_attempts`. Returns how many turns were dead-lettered."""
    attempts = Turn.attempts + 1 if count_attempt else Turn.attempts
    res = session.execute(
        update(Turn)
        .where(Turn.batch_id == batch_id, Turn.status == TurnStatus.CLAIMED)
        .values(
            attempts=attempts,
            status=case(
                (attempts >= settings.max_attempts, TurnStatus.FAILED), else_=TurnStatus.PENDING
            ),
        )
        .returning(Turn.status)
    )
    dead = sum(1 for status in res.scalars() if status == TurnStatus.FAILED)
    _uncount_pending(session, key, dead)
    return dead


def split_failed(session: Session, claim: Claim) -> bool:
    """A batch of several turns failed for good (a permanent error or a bug), perhaps
    because of one of them: its turns go back without counting an attempt, and the
    session's next claims over them take half as many, until the turn that fails stands
    alone and counts its own attempts. False for a batch of one turn."""
    if len(claim.turns) < 2:
        return False
    chat = session.scalars(select(ChatSession).where(*session_pk(claim.key))).one()
    chat.split_limit = len(claim.turns) // 2
    chat.split_until = max(chat.split_until or 0, claim.turns[-1].id)
    return True


def end_split(session: Session, key: SessionKey) -> None:
    """The failing turn was dead-lettered: the rest go back to whole batches."""
    session.execute(
        update(ChatSession)
        .where(*session_pk(key), ChatSession.split_until.is_not(None))
        .values(split_limit=None, split_until=None)
    )


def back_off(
    session: Session, settings: ExtractionSettings, key: SessionKey, now: datetime
) -> datetime:
    """After a transient failure: the session's next claim waits, exponentially longer
    with each consecutive failure (with jitter, capped). Returns when it may run."""
    chat = session.scalars(select(ChatSession).where(*session_pk(key))).one()
    failures = chat.transient_failures + 1
    wait = min(
        settings.retry_backoff_seconds * 2 ** min(failures - 1, 20),
        settings.retry_backoff_max_seconds,
    )
    retry_at = now + timedelta(seconds=wait * random.uniform(0.8, 1.0))
    session.execute(
        update(ChatSession)
        .where(*session_pk(key))
        .values(transient_failures=failures, retry_at=retry_at)
    )
    return retry_at


def _uncount_pending(session: Session, key: SessionKey, n: int) -> None:
    if n:
        session.execute(
            update(ChatSession)
            .where(*session_pk(key))
            .values(pending_count=_less_pending(session, n))
        )


def _less_pending(session: Session, n: int) -> ColumnElement[int]:
    return greatest(session, ChatSession.pending_count - n, 0)


# --------------------------------------------------------------------------- renewal


def renew_lease(
    session: Session, settings: ExtractionSettings, key: SessionKey, batch_id: int, now: datetime
) -> bool:
    """Extend a live batch's lease. False if the batch no longer holds it."""
    return EXTRACTION_LEASE.renew(session, settings, key, batch_id, now)


# ----------------------------------------------------------------------------- recovery


def recover_stranded(
    session: Session, settings: ExtractionSettings, chat: ChatSession, now: datetime
) -> int:
    """Return the session's claimed turns that no live lease covers; the caller holds the
    session row lock. A turn whose batches lost their lease `max_lost_leases` times (a
    batch that kills its worker every time) is dead-lettered. Returns how many turns."""
    key = SessionKey(chat.agent_id, chat.user_id, chat.session_id)
    live = EXTRACTION_LEASE.is_live(chat, now)
    stranded = [*turns_of(key), Turn.status == written_in(TurnStatus.CLAIMED)]
    if live:
        stranded.append(Turn.batch_id != chat.lease_batch_id)
    elif chat.lease_batch_id is not None:
        # The lease ran out: its batch loses it now, in this transaction, so that it
        # cannot write its result after its turns went back.
        for column, value in EXTRACTION_LEASE.released().items():
            setattr(chat, column, value)
        session.flush()
    lost = Turn.lost_leases + 1
    rows = session.execute(
        update(Turn)
        .where(*stranded)
        .values(
            lost_leases=lost,
            status=case(
                (lost >= settings.max_lost_leases, TurnStatus.FAILED), else_=TurnStatus.PENDING
            ),
        )
        .returning(Turn.batch_id, Turn.status)
    ).all()
    if not rows:
        return 0
    _uncount_pending(session, key, sum(1 for r in rows if r.status == TurnStatus.FAILED))
    session.execute(
        update(ExtractionBatch)
        .where(
            ExtractionBatch.id.in_({r.batch_id for r in rows}),
            ExtractionBatch.status == BatchStatus.RUNNING,
        )
        .values(
            status=BatchStatus.ABANDONED,
            finished_at=now,
            error="lease lost: the worker died or stopped renewing within lease_seconds",
        )
    )
    log.warning("returned %d stranded turns of %s", len(rows), key)
    return len(rows)
