"""Tables of the profile documents (seed 001) and their history."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from memoryd.models.base import Base, BigId, Scoped


class Profile(Scoped, Base):
    """One structured document per scope and type (seed 001: `user` and `work`)."""

    __tablename__ = "profiles"
    __table_args__ = (
        UniqueConstraint("agent_id", "user_id", "type", name="uq_profiles_scope_type"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    agent_id: Mapped[str] = mapped_column(String(200))
    user_id: Mapped[str] = mapped_column(String(200))
    type: Mapped[str] = mapped_column(String(10))
    status: Mapped[str] = mapped_column(String(10), default="active")
    content: Mapped[dict[str, Any]] = mapped_column(JSON)
    # {dotted field path: {source, confidence, last_updated_at}} for plain fields; list
    # items carry their own `meta` inside `content`.
    field_meta: Mapped[dict[str, Any]] = mapped_column(JSON)
    version: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class ProfileEvent(Scoped, Base):
    """The history of a profile: each change as the JSON merge patch (RFC 7396) that turns
    the previous version into this one, so replaying the patches rebuilds the document."""

    __tablename__ = "profile_events"
    __table_args__ = (Index("ix_profile_events_profile", "profile_id", "version"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    profile_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("profiles.id", ondelete="CASCADE")
    )
    agent_id: Mapped[str] = mapped_column(String(200))
    user_id: Mapped[str] = mapped_column(String(200))
    version: Mapped[int] = mapped_column(Integer)
    actor: Mapped[str] = mapped_column(String(12))
    batch_id: Mapped[int | None] = mapped_column(BigInteger)
    patch: Mapped[dict[str, Any]] = mapped_column(JSON)
    meta_patch: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime]
