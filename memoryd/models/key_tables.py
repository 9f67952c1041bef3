"""Tables of the subject keys a scope uses (memoryd/models/key_index.py): their counts,
and the aliases reconciliation learnt between two names of one subject."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Index, Integer, String, false, text
from sqlalchemy.orm import Mapped, mapped_column

from memoryd.models.base import Base, BigId, Scoped


class SubjectKey(Scoped, Base):
    """A change to how many memories of a scope hold one subject key (`held`, any
    status) and how many of those are active: written by triggers on every insert,
    delete and change of a memory's status or key, folded by the maintenance cycle into
    one row per scope and key. A scope's keys sum these rows, never its memories."""

    __tablename__ = "subject_keys"
    __table_args__ = (
        Index("ix_subject_keys_scope", "agent_id", "user_id", "name_key"),
        # The changes the next fold reads, oldest first, without a scan of the folded.
        Index(
            "ix_subject_keys_unfolded",
            "id",
            postgresql_where=text("NOT folded"),
            sqlite_where=text("NOT folded"),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    agent_id: Mapped[str] = mapped_column(String(200))
    user_id: Mapped[str] = mapped_column(String(200))
    name_key: Mapped[str] = mapped_column(String(200))
    active: Mapped[int] = mapped_column(Integer)
    held: Mapped[int] = mapped_column(Integer)
    used_at: Mapped[datetime]
    folded: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class KeyAlias(Scoped, Base):
    """Another name of a scope's subject key, learnt when the model (or a synonym rule)
    said a fact under `alias` replaces or repeats a memory of `name_key`: later facts
    named `alias` land on `name_key`."""

    __tablename__ = "key_aliases"

    agent_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    alias: Mapped[str] = mapped_column(String(200), primary_key=True)
    name_key: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime]
