"""Tables of the conversation: turns as they arrive, the sessions' bookkeeping (leases,
back-off, compression) and the sessions' summaries."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
    func,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from memoryd.models.base import Base, BigId, Scoped, TurnStatus


class Turn(Scoped, Base):
    __tablename__ = "turns"
    __table_args__ = (
        UniqueConstraint("agent_id", "user_id", "turn_key", name="uq_turns_scope_key"),
        # Reading a session's turns in order (context, compression).
        Index("ix_turns_session", "agent_id", "user_id", "session_id", "id"),
        # Claims and the sweeper only look at pending turns: a small partial index.
        Index(
            "ix_turns_pending",
            "agent_id",
            "user_id",
            "session_id",
            "id",
            postgresql_where=text("status = 'pending'"),
            sqlite_where=text("status = 'pending'"),
        ),
        # The backlog's age (/metrics): the pending turn received first, read at one end.
        Index(
            "ix_turns_pending_received",
            "received_at",
            postgresql_where=text("status = 'pending'"),
            sqlite_where=text("status = 'pending'"),
        ),
        # Finishing, failing and reaping a batch find its turns.
        Index(
            "ix_turns_batch",
            "batch_id",
            postgresql_where=text("batch_id IS NOT NULL"),
            sqlite_where=text("batch_id IS NOT NULL"),
        ),
        # The sweeper checks every claimed turn against its session's lease: the turns
        # in flight, a few hundred at most, whatever the size of the table.
        Index(
            "ix_turns_claimed",
            "agent_id",
            "user_id",
            "session_id",
            postgresql_where=text("status = 'claimed'"),
            sqlite_where=text("status = 'claimed'"),
        ),
        # Dead letters: metrics, the page and retries read only the failed turns.
        Index(
            "ix_turns_failed",
            "agent_id",
            "user_id",
            "session_id",
            postgresql_where=text("status = 'failed'"),
            sqlite_where=text("status = 'failed'"),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    turn_key: Mapped[str | None] = mapped_column(String(200))
    agent_id: Mapped[str] = mapped_column(String(200))
    user_id: Mapped[str] = mapped_column(String(200))
    session_id: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(20))
    content: Mapped[str] = mapped_column(Text)
    metadata_: Mapped[dict[str, Any] | None] = mapped_column("metadata", JSON)
    # When the turn was said: the sender's `timestamp` (an import's may be days old), or
    # when memoryd received it.
    created_at: Mapped[datetime]
    # When memoryd received it, whatever the sender stamped: how long it has waited.
    # Ingest sets it; the default covers a writer that does not name it.
    received_at: Mapped[datetime] = mapped_column(server_default=func.now())
    status: Mapped[str] = mapped_column(String(10), default=TurnStatus.PENDING)
    # Failed attempts that count toward dead-lettering: permanent LLM errors and bugs,
    # never outages (see ingest/leases.py).
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # Times the batch holding this turn lost its lease (its worker died or hung).
    lost_leases: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # The batch that holds (or last held) this turn. A claimed turn is alive exactly as
    # long as its session's lease names this batch and has not expired.
    batch_id: Mapped[int | None] = mapped_column(BigInteger)
    token_count: Mapped[int] = mapped_column(Integer, default=0)


class ChatSession(Scoped, Base):
    """Per-session bookkeeping; the lease columns make one batch per session run at a time."""

    __tablename__ = "sessions"
    # The secondary indexes are on columns ingest never changes (leases, and
    # compress_due, which changes only when a batch takes the session over
    # compress_trigger_tokens or compression catches up), so the ingest upsert still
    # updates the row in place (HOT). The sweeper finds due sessions through the partial
    # index of pending turns, compression through the one of compress_due.
    __table_args__ = (
        Index(
            "ix_sessions_lease",
            "lease_until",
            postgresql_where=text("lease_until IS NOT NULL"),
            sqlite_where=text("lease_until IS NOT NULL"),
        ),
        Index(
            "ix_sessions_compress_due",
            "agent_id",
            "user_id",
            "session_id",
            postgresql_where=text("compress_due"),
            sqlite_where=text("compress_due = 1"),
        ),
    )

    agent_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    session_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    last_activity_at: Mapped[datetime]
    # Turns not yet done or failed; only decides when ingest sends a trigger.
    pending_count: Mapped[int] = mapped_column(Integer, default=0)
    ended_at: Mapped[datetime | None]
    # The one batch allowed to extract this session's turns, until lease_until (the
    # database's clock). Renewed while its LLM call runs.
    lease_batch_id: Mapped[int | None] = mapped_column(BigInteger)
    lease_until: Mapped[datetime | None]
    # Back-off after transient LLM failures: no claim before retry_at.
    retry_at: Mapped[datetime | None]
    transient_failures: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Poison isolation: a batch that failed for good left turns up to split_until, and
    # the session's claims there take at most split_limit of them (memoryd/ingest/leases.py).
    split_limit: Mapped[int | None] = mapped_column(Integer)
    split_until: Mapped[int | None] = mapped_column(BigInteger)
    summary: Mapped[str | None] = mapped_column(Text)
    summary_upto: Mapped[int | None] = mapped_column(BigInteger)
    compressed_at: Mapped[datetime | None]
    compress_batch_id: Mapped[int | None] = mapped_column(BigInteger)
    compress_lease_until: Mapped[datetime | None]
    compress_attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    compress_error: Mapped[str | None] = mapped_column(Text)
    # Its unsummarised turns hold more than compress_trigger_tokens: set as a batch
    # finishes, cleared as compression catches up (memoryd/ingest/leases.py).
    compress_due: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class SessionSegment(Scoped, Base):
    """A summary of about ten consecutive turns; the session synopsis is built from these."""

    __tablename__ = "session_segments"
    __table_args__ = (
        Index("ix_session_segments_session", "agent_id", "user_id", "session_id", "first_turn_id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    agent_id: Mapped[str] = mapped_column(String(200))
    user_id: Mapped[str] = mapped_column(String(200))
    session_id: Mapped[str] = mapped_column(String(200))
    first_turn_id: Mapped[int] = mapped_column(BigInteger)
    last_turn_id: Mapped[int] = mapped_column(BigInteger)
    turn_count: Mapped[int] = mapped_column(Integer)
    summary: Mapped[str] = mapped_column(Text)
    prompt_version: Mapped[str] = mapped_column(String(50))
    created_at: Mapped[datetime]
