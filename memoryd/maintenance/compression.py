"""Session compression: long sessions get segment summaries and one running synopsis.

Raw turns stay in the database. A session is compressed when its unsummarised turns
pass `compress_trigger_tokens`: the older ones (all but `keep_recent_turns`) are
summarised in segments of about ten turns, then the synopsis is updated from the
previous synopsis plus the new segments, so a second run only pays for what is new.
No transaction is open during LLM calls; a per-session lease keeps two runs apart.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, exists, select, true, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from memoryd.errors import (
    BatchFailed,
    LLMEndpointError,
    LLMError,
    LLMTransientError,
    error_text,
    log_failure,
)
from memoryd.ingest.heartbeat import kept_alive
from memoryd.ingest.leases import compress_due, open_batch
from memoryd.ingest.session_lease import COMPRESSION_LEASE
from memoryd.llm import circuit
from memoryd.maintenance.summarizers import Summarizer, Summary, get_summarizer
from memoryd.models.coordination import database_time
from memoryd.models.db import rowcount, session_scope, utcnow
from memoryd.models.keys import SessionKey, session_pk, turns_of
from memoryd.models.tables import (
    BatchStatus,
    ChatSession,
    ExtractionBatch,
    FailureKind,
    SessionSegment,
    Turn,
)
from memoryd.settings import ExtractionSettings, MaintenanceSettings, Settings

log = logging.getLogger(__name__)

SEGMENT_TURNS = 10
SESSIONS_PER_RUN = 100


def compression_candidates(
    settings: ExtractionSettings, now: datetime, limit: int = SESSIONS_PER_RUN
) -> Select[str, str, str]:
    """Sessions marked due (a batch took their unsummarised turns past the trigger),
    skipping dead-lettered ones (too many failures; `memoryd retry` resets) and those
    another run holds. Read through the partial index of due sessions: the cost follows
    the sessions to compress, not the turns or sessions stored."""
    return (
        select(ChatSession.agent_id, ChatSession.user_id, ChatSession.session_id)
        .where(
            ChatSession.compress_due == true(),  # as the index's predicate reads
            ChatSession.compress_attempts < settings.max_attempts,
            COMPRESSION_LEASE.free(now),
        )
        .limit(limit)
    )


def sessions_to_compress(
    session: Session, settings: ExtractionSettings, now: datetime
) -> list[SessionKey]:
    return [SessionKey(*r) for r in session.execute(compression_candidates(settings, now))]


@dataclass
class CompressionWork:
    key: SessionKey
    batch_id: int
    previous: str
    upto: int  # summary_upto when claimed: the run may write only if it is unchanged
    turns: list[tuple[int, str, str]]  # (id, role, content), oldest first, to summarise


def claim_compression(
    session: Session, settings: Settings, key: SessionKey, now: datetime
) -> CompressionWork | None:
    """Take the session's compression lease and the turns to summarise, or None: not
    due after all (the mark is cleared), or another run holds the lease."""
    chat = session.scalars(select(ChatSession).where(*session_pk(key))).first()
    if chat is None:
        return None
    older = _turns_to_summarise(session, settings.maintenance, chat, key)
    if not older:
        return None
    batch = open_batch(session, key, "compress", [r.id for r in older], now)
    if not _take_lease(session, settings.extraction, key, batch.id, chat.summary_upto, now):
        session.rollback()
        return None
    return CompressionWork(
        key,
        batch.id,
        chat.summary or "",
        chat.summary_upto or 0,
        [(r.id, r.role, r.content) for r in older],
    )


def _turns_to_summarise(
    session: Session, settings: MaintenanceSettings, chat: ChatSession, key: SessionKey
) -> list[Any]:
    """The unsummarised turns but the newest keep_recent_turns, when all of them pass
    the trigger; otherwise none, and the session's mark is set right: measured again in
    the statement (the trigger may have been raised since, and a batch finishing
    meanwhile is counted), and with only recent turns unmarked until the next batch
    finishes, unless one already added turns since the read here."""
    upto = chat.summary_upto or 0
    rows = session.execute(
        select(Turn.id, Turn.role, Turn.content, Turn.token_count)
        .where(*turns_of(key), Turn.id > upto)
        .order_by(Turn.id)
    ).all()
    older = rows[: max(len(rows) - settings.keep_recent_turns, 0)]
    if older and sum(r.token_count for r in rows) > settings.compress_trigger_tokens:
        return list(older)
    due = compress_due(settings, upto)
    if not older:
        due = and_(exists().where(*turns_of(key), Turn.id > (rows[-1].id if rows else upto)), due)
    session.execute(update(ChatSession).where(*session_pk(key)).values(compress_due=due))
    return []


def _take_lease(
    session: Session,
    settings: ExtractionSettings,
    key: SessionKey,
    batch_id: int,
    upto: int | None,
    now: datetime,
) -> bool:
    """Compare-and-set: one run per session, and only over the summary it read (a run
    that finished meanwhile moved summary_upto: its turns are not summarised twice). The
    lease names its batch, so a run that outlived its lease and was overtaken can tell
    (see _still_ours)."""
    unchanged = ChatSession.summary_upto.is_not_distinct_from(upto)
    return COMPRESSION_LEASE.take(session, settings, key, batch_id, now, unchanged)


def _still_ours(work: CompressionWork) -> tuple[ColumnElement[bool], ...]:
    # A run whose lease ran out may have been overtaken by one that took the lease and
    # summarised the same turns; the lease naming another batch is how it can tell.
    return COMPRESSION_LEASE.held_by(work.key, work.batch_id)


def renew_compression(
    session: Session, settings: ExtractionSettings, work: CompressionWork, now: datetime
) -> bool:
    return COMPRESSION_LEASE.renew(session, settings, work.key, work.batch_id, now)


def _abandon(session: Session, work: CompressionWork, now: datetime) -> None:
    log.warning("compression of %s overtaken by another run; discarded", work.key)
    session.execute(
        update(ExtractionBatch)
        .where(ExtractionBatch.id == work.batch_id)
        .values(
            status=BatchStatus.ABANDONED,
            error="another run compressed these turns first",
            finished_at=now,
        )
    )


def _finish(
    session: Session,
    settings: MaintenanceSettings,
    work: CompressionWork,
    segments: list[tuple[list[int], Summary]],
    synopsis: Summary,
    now: datetime,
    started: float,
) -> bool:
    written = session.execute(
        update(ChatSession)
        .where(*_still_ours(work))
        .values(
            summary=synopsis.text,
            summary_upto=work.turns[-1][0],
            compress_due=compress_due(settings, work.turns[-1][0]),
            compressed_at=now,
            **COMPRESSION_LEASE.released(),
            compress_attempts=0,
            compress_error=None,
        )
    )
    if rowcount(written) != 1:
        _abandon(session, work, now)
        return False
    _add_segments(session, work.key, segments, now)
    _record_run(session, work.batch_id, segments, synopsis, now, started)
    return True


def _add_segments(
    session: Session,
    key: SessionKey,
    segments: list[tuple[list[int], Summary]],
    now: datetime,
) -> None:
    for ids, summary in segments:
        session.add(
            SessionSegment(
                agent_id=key.agent_id,
                user_id=key.user_id,
                session_id=key.session_id,
                first_turn_id=ids[0],
                last_turn_id=ids[-1],
                turn_count=len(ids),
                summary=summary.text,
                prompt_version=summary.version,
                created_at=now,
            )
        )


def _record_run(
    session: Session,
    batch_id: int,
    segments: list[tuple[list[int], Summary]],
    synopsis: Summary,
    now: datetime,
    started: float,
) -> None:
    """The run's batch row: done, with the calls and tokens of every summary."""
    parts = [s for _ids, s in segments] + [synopsis]
    session.execute(
        update(ExtractionBatch)
        .where(ExtractionBatch.id == batch_id)
        .values(
            status=BatchStatus.DONE,
            extractor="llm" if synopsis.model else "offline",
            model=synopsis.model,
            prompt_version=synopsis.version,
            tokens_in=sum(p.tokens_in for p in parts),
            tokens_out=sum(p.tokens_out for p in parts),
            llm_calls=sum(p.calls for p in parts),
            finished_at=now,
            duration_ms=(time.perf_counter() - started) * 1000,
        )
    )


def _fail(
    session: Session,
    settings: ExtractionSettings,
    work: CompressionWork,
    kind: FailureKind,
    error: str,
    now: datetime,
    used_llm: bool,
) -> None:
    """Free the lease and record the failure. An outage does not count toward the
    session's `max_attempts` (the next run tries again); an error or a bug does."""
    counted = 0 if kind == FailureKind.TRANSIENT else 1
    failed = session.execute(
        update(ChatSession)
        .where(*_still_ours(work))
        .values(
            **COMPRESSION_LEASE.released(),
            compress_attempts=ChatSession.compress_attempts + counted,
            compress_error=error[:2000],
        )
    )
    if rowcount(failed) != 1:  # the session is fine: another run already did the work
        _abandon(session, work, now)
        return
    if kind == FailureKind.TRANSIENT and used_llm:
        circuit.record_failure(session, settings, database_time(session))
    session.execute(
        update(ExtractionBatch)
        .where(ExtractionBatch.id == work.batch_id)
        .values(status=BatchStatus.FAILED, error=error[:2000], error_kind=kind, finished_at=now)
    )


def _summarise(
    summarizer: Summarizer, work: CompressionWork
) -> tuple[list[tuple[list[int], Summary]], Summary]:
    segments = []
    for i in range(0, len(work.turns), SEGMENT_TURNS):
        chunk = work.turns[i : i + SEGMENT_TURNS]
        summary = summarizer.segment([(role, content) for _id, role, content in chunk])
        segments.append(([t[0] for t in chunk], summary))
    return segments, summarizer.synopsis(work.previous, [s.text for _ids, s in segments])


def compress_session(
    settings: Settings, key: SessionKey, summarizer: Summarizer | None = None
) -> bool:
    """Compress one session if it is due. True if a new synopsis was written. Raises only
    on a bug, after recording it and freeing the lease."""
    summarizer = summarizer or get_summarizer(settings)
    with session_scope(settings.storage) as session:
        now = database_time(session)
        if summarizer.uses_llm and circuit.read(session).is_open(now, settings.extraction):
            return False  # the LLM is down: the next run tries again
        work = claim_compression(session, settings, key, now)
        if work is None:
            return False
    started = time.perf_counter()

    def renew(session: Session, now: datetime) -> bool:
        return renew_compression(session, settings.extraction, work, now)

    try:
        with kept_alive(settings, renew, f"compress-{work.batch_id}"):
            segments, synopsis = _summarise(summarizer, work)
    except Exception as exc:
        if isinstance(exc, LLMTransientError | LLMEndpointError):  # as extraction's
            kind = FailureKind.TRANSIENT
        elif isinstance(exc, LLMError):
            kind = FailureKind.PERMANENT
        else:
            kind = FailureKind.BUG
        error = str(exc) if kind != FailureKind.BUG else f"unexpected {error_text(exc)}"
        log.warning("compression of %s failed (%s): %s", key, kind, error)
        with session_scope(settings.storage) as session:
            _fail(session, settings.extraction, work, kind, error, utcnow(), summarizer.uses_llm)
        if kind == FailureKind.BUG:
            raise
        return False
    with session_scope(settings.storage) as session:
        written = _finish(
            session, settings.maintenance, work, segments, synopsis, utcnow(), started
        )
        if written and summarizer.uses_llm:
            circuit.record_success(session, utcnow())
        return written


def compress_due_sessions(settings: Settings) -> dict[str, int]:
    """Compress every due session. A session that fails does not stop the others; the
    run raises at the end if any failed on a bug, so the task shows FAILURE."""
    with session_scope(settings.storage) as session:
        due = sessions_to_compress(session, settings.extraction, database_time(session))
    done = bugs = 0
    for key in due:
        try:
            done += compress_session(settings, key)
        except Exception as exc:
            log_failure(log, f"compression of {key} failed on a bug", exc)
            bugs += 1
    log.info("compressed %d of %d due sessions", done, len(due))
    if bugs:
        raise BatchFailed(f"compression failed on a bug for {bugs} of {len(due)} sessions")
    return {"due": len(due), "compressed": done}
