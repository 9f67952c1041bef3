"""Tables of the data lifecycle and of the figures that outlive rows: the audit trail of
erasures, the totals of removed batches, the tallies of memories."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Float, Index, String, text
from sqlalchemy.orm import Mapped, mapped_column

from memoryd.models.base import Base, BigId


class Erasure(Base):
    """One erasure request: who asked, when, which scope (as a digest) and how many rows
    went. While it runs it holds the scope's ids, so an interrupted erasure can be
    resumed by anyone (`memoryd erase` again, or beat); once done they are cleared and
    only the digest stays: the row then holds no id and no content of the scope."""

    __tablename__ = "erasures"
    __table_args__ = (
        Index(
            "ix_erasures_running",
            "updated_at",
            postgresql_where=text("finished_at IS NULL"),
            sqlite_where=text("finished_at IS NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    # SHA-256 of agent, user and session (if any): an operator holding the ids can check
    # that a scope was erased; the row alone names nobody.
    digest: Mapped[str] = mapped_column(String(64), index=True)
    actor: Mapped[str] = mapped_column(String(200))
    agent_id: Mapped[str | None] = mapped_column(String(200))  # cleared when done
    user_id: Mapped[str | None] = mapped_column(String(200))  # cleared when done
    session_id: Mapped[str | None] = mapped_column(String(200))  # cleared when done
    whole_scope: Mapped[bool]
    rows: Mapped[dict[str, Any]]  # rows removed, per table
    requested_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]


class BatchTotal(Base):
    """What the batches removed by retention or erasure recorded, per status and kind
    (extraction or compression), so the pipeline's totals (and the Prometheus counters
    read from them) never go back: figures only, no scope and no content
    (memoryd/models/batch_totals.py)."""

    __tablename__ = "batch_totals"

    status: Mapped[str] = mapped_column(String(10), primary_key=True)
    kind: Mapped[str] = mapped_column(String(12), primary_key=True)
    batches: Mapped[int] = mapped_column(BigInteger, default=0)
    llm_calls: Mapped[int] = mapped_column(BigInteger, default=0)
    tokens_in: Mapped[int] = mapped_column(BigInteger, default=0)
    tokens_out: Mapped[int] = mapped_column(BigInteger, default=0)
    facts_proposed: Mapped[int] = mapped_column(BigInteger, default=0)
    facts_accepted: Mapped[int] = mapped_column(BigInteger, default=0)
    rejections: Mapped[dict[str, Any]]  # reason -> facts
    last_finished_at: Mapped[datetime | None]


class MemoryTally(Base):
    """A change to how many memories there are of a status, tier and category, and to
    their summed confidence: written by triggers on every insert, delete and change of
    those columns (memoryd/models/tallies.py), folded by the maintenance cycle into one
    row per key. The whole store's figures sum these rows, never the memories."""

    __tablename__ = "memory_tallies"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    status: Mapped[str] = mapped_column(String(12))
    tier: Mapped[str] = mapped_column(String(10))
    category: Mapped[str] = mapped_column(String(20))
    memories: Mapped[int] = mapped_column(BigInteger)
    confidence: Mapped[float] = mapped_column(Float)
