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
from datetime import datetime, timedelta

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from memoryd.errors import LLMError
from memoryd.maintenance.summarizers import Summarizer, Summary, get_summarizer
from memoryd.models.db import rowcount, session_scope, utcnow
from memoryd.models.keys import SessionKey, session_pk, turns_of
from memoryd.models.tables import BatchStatus, ChatSession, ExtractionBatch, SessionSegment, Turn
from memoryd.settings import Settings

log = logging.getLogger(__name__)

SEGMENT_TURNS = 10
SESSIONS_PER_RUN = 100


def sessions_to_compress(
    session: Session, settings: Settings, now: datetime, limit: int = SESSIONS_PER_RUN
) -> list[SessionKey]:
    """Sessions active since their last compression whose unsummarised turns pass the
    trigger, skipping dead-lettered ones (too many failures; `memoryd retry` resets)."""
    rows = session.execute(
        select(Turn.agent_id, Turn.user_id, Turn.session_id)
        .join(
            ChatSession,
            and_(
                ChatSession.agent_id == Turn.agent_id,
                ChatSession.user_id == Turn.user_id,
                ChatSession.session_id == Turn.session_id,
            ),
        )
        .where(
            Turn.id > func.coalesce(ChatSession.summary_upto, 0),
            or_(
                ChatSession.compressed_at.is_(None),
                ChatSession.last_activity_at > ChatSession.compressed_at,
            ),
            ChatSession.compress_attempts < settings.max_attempts,
            or_(
                ChatSession.compress_lease_until.is_(None), ChatSession.compress_lease_until <= now
            ),
        )
        .group_by(Turn.agent_id, Turn.user_id, Turn.session_id)
        .having(func.sum(Turn.token_count) > settings.compress_trigger_tokens)
        .limit(limit)
    ).all()
    return [SessionKey(*r) for r in rows]


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
    chat = session.scalars(select(ChatSession).where(*session_pk(key))).first()
    if chat is None:
        return None
    rows = session.execute(
        select(Turn.id, Turn.role, Turn.content, Turn.token_count)
        .where(*turns_of(key), Turn.id > (chat.summary_upto or 0))
        .order_by(Turn.id)
    ).all()
    if sum(r.token_count for r in rows) <= settings.compress_trigger_tokens:
        return None
    older = rows[: max(len(rows) - settings.keep_recent_turns, 0)]
    if not older:
        return None
    taken = session.execute(
        update(ChatSession)
        .where(
            *session_pk(key),
            or_(
                ChatSession.compress_lease_until.is_(None), ChatSession.compress_lease_until <= now
            ),
        )
        .values(compress_lease_until=now + timedelta(seconds=settings.lease_seconds))
    )
    if rowcount(taken) != 1:
        return None
    batch = ExtractionBatch(
        agent_id=key.agent_id,
        user_id=key.user_id,
        session_id=key.session_id,
        kind="compress",
        status=BatchStatus.RUNNING,
        first_turn_id=older[0].id,
        last_turn_id=older[-1].id,
        turn_count=len(older),
        started_at=now,
    )
    session.add(batch)
    session.flush()
    return CompressionWork(
        key,
        batch.id,
        chat.summary or "",
        chat.summary_upto or 0,
        [(r.id, r.role, r.content) for r in older],
    )


def _still_ours(work: CompressionWork) -> tuple[ColumnElement[bool], ...]:
    # A run whose lease ran out may have been overtaken by one that already summarised
    # the same turns; summary_upto moving on is how it can tell.
    return (*session_pk(work.key), func.coalesce(ChatSession.summary_upto, 0) == work.upto)


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
            compressed_at=now,
            compress_lease_until=None,
            compress_attempts=0,
            compress_error=None,
        )
    )
    if rowcount(written) != 1:
        _abandon(session, work, now)
        return False
    for ids, summary in segments:
        session.add(
            SessionSegment(
                agent_id=work.key.agent_id,
                user_id=work.key.user_id,
                session_id=work.key.session_id,
                first_turn_id=ids[0],
                last_turn_id=ids[-1],
                turn_count=len(ids),
                summary=summary.text,
                prompt_version=summary.version,
                created_at=now,
            )
        )
    parts = [s for _ids, s in segments] + [synopsis]
    session.execute(
        update(ExtractionBatch)
        .where(ExtractionBatch.id == work.batch_id)
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
    return True


def _fail(session: Session, work: CompressionWork, error: str, now: datetime) -> None:
    failed = session.execute(
        update(ChatSession)
        .where(*_still_ours(work))
        .values(
            compress_lease_until=None,
            compress_attempts=ChatSession.compress_attempts + 1,
            compress_error=error[:2000],
        )
    )
    if rowcount(failed) != 1:  # the session is fine: another run already did the work
        _abandon(session, work, now)
        return
    session.execute(
        update(ExtractionBatch)
        .where(ExtractionBatch.id == work.batch_id)
        .values(status=BatchStatus.FAILED, error=error[:2000], finished_at=now)
    )


def compress_session(
    settings: Settings, key: SessionKey, summarizer: Summarizer | None = None
) -> bool:
    """Compress one session if it is due. True if a new synopsis was written."""
    summarizer = summarizer or get_summarizer(settings)
    with session_scope(settings) as session:
        work = claim_compression(session, settings, key, utcnow())
        if work is None:
            session.rollback()
            return False
    started = time.perf_counter()
    try:
        segments = []
        for i in range(0, len(work.turns), SEGMENT_TURNS):
            chunk = work.turns[i : i + SEGMENT_TURNS]
            summary = summarizer.segment([(role, content) for _id, role, content in chunk])
            segments.append(([t[0] for t in chunk], summary))
        synopsis = summarizer.synopsis(work.previous, [s.text for _ids, s in segments])
    except LLMError as exc:
        log.warning("compression of %s failed: %s", key, exc)
        with session_scope(settings) as session:
            _fail(session, work, str(exc), utcnow())
        return False
    with session_scope(settings) as session:
        return _finish(session, work, segments, synopsis, utcnow(), started)


def compress_due_sessions(settings: Settings) -> dict[str, int]:
    with session_scope(settings) as session:
        due = sessions_to_compress(session, settings, utcnow())
    done = sum(compress_session(settings, key) for key in due)
    log.info("compressed %d of %d due sessions", done, len(due))
    return {"due": len(due), "compressed": done}
