"""Tables of the HTTP server: API keys, page sessions, per-agent settings, conflict
reviews."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Float,
    ForeignKey,
    Integer,
    String,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from memoryd.models.base import Base, BigId

# ------------------------------------------------------------------- memoryd serve (0006)


class ApiKey(Base):
    """An HTTP API key. Only its SHA-256 is stored; the key is shown once, at creation.
    It may use the scopes of `agent_ids` (and only `user_id`'s, when set); an admin key
    may use every scope, the operations endpoints and the memory page."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200))
    prefix: Mapped[str] = mapped_column(String(20))  # the key's first characters, for lists
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    agent_ids: Mapped[list[str]] = mapped_column(JSON, default=list)
    user_id: Mapped[str | None] = mapped_column(String(200))
    admin: Mapped[bool] = mapped_column(default=False, server_default=text("false"))
    created_at: Mapped[datetime]
    revoked_at: Mapped[datetime | None]


class AgentConfig(Base):
    """Per-agent memory settings (seed 000 §8), named as the Settings fields they override.
    NULL means "the default from Settings", so changing a default changes every agent
    that did not override it."""

    __tablename__ = "agent_settings"

    agent_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    memory_enabled: Mapped[bool | None]
    prefetch_limit: Mapped[int | None] = mapped_column(Integer)
    context_token_budget: Mapped[int | None] = mapped_column(Integer)
    memory_categories: Mapped[list[str] | None] = mapped_column(JSON(none_as_null=True))
    inject_min_score: Mapped[float | None] = mapped_column(Float)
    inject_max_items: Mapped[int | None] = mapped_column(Integer)
    inject_tiers: Mapped[list[str] | None] = mapped_column(JSON(none_as_null=True))
    inject_first_round_empty: Mapped[bool | None]
    inject_min_query_length: Mapped[int | None] = mapped_column(Integer)
    inject_long_term_triggers: Mapped[list[str] | None] = mapped_column(JSON(none_as_null=True))
    recall_pending: Mapped[bool | None]
    updated_at: Mapped[datetime]


class ConflictReview(Base):
    """A person looked at a replacement (a superseded memory and the one that replaced
    it) and kept one side; reviewed pairs leave the conflicts list. A later replacement
    of the same memory is a new pair, to be reviewed again."""

    __tablename__ = "conflict_reviews"

    memory_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("memories.id", ondelete="CASCADE"), primary_key=True
    )
    superseded_by_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    kept_id: Mapped[int] = mapped_column(BigInteger)
    reviewed_at: Mapped[datetime]


class PageSession(Base):
    """A signed-in page: the cookie holds a random token, this row its SHA-256. Signing
    out deletes the row; revoking the key ends it at the next request (the key is read
    with the session); past `expires_at` it is refused and swept."""

    __tablename__ = "page_sessions"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    key_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("api_keys.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime]
