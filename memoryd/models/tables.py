"""Tables of DESIGN.md as SQLAlchemy 2 typed models. Migrations live in `migrations/`.

The base, column types and enums live in base.py and are re-exported here, so a table's
module names everything a query about it needs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    PrimaryKeyConstraint,
    String,
    Text,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from memoryd.models.base import (
    NAMING_CONVENTION,
    SHARED_USER,
    Actor,
    Base,
    BatchStatus,
    BigId,
    Category,
    EventKind,
    FailureKind,
    MemoryStatus,
    Scoped,
    Tier,
    TurnStatus,
    UTCDateTime,
)

__all__ = [
    "NAMING_CONVENTION",
    "SHARED_USER",
    "Actor",
    "AgentConfig",
    "ApiKey",
    "Base",
    "BatchStatus",
    "BatchTotal",
    "BigId",
    "Category",
    "ChatSession",
    "Circuit",
    "ConflictReview",
    "Erasure",
    "EventKind",
    "ExtractionBatch",
    "FailureKind",
    "KeyAlias",
    "Memory",
    "MemoryEvent",
    "MemoryStatus",
    "MemoryTally",
    "MemoryUsage",
    "PageSession",
    "Profile",
    "ProfileEvent",
    "SessionSegment",
    "SubjectKey",
    "Tier",
    "Turn",
    "TurnStatus",
    "UTCDateTime",
]


class Memory(Scoped, Base):
    __tablename__ = "memories"
    __table_args__ = (
        # search_length rides along so BM25's scope statistics are an index-only scan.
        Index(
            "ix_memories_scope_status",
            "agent_id",
            "user_id",
            "status",
            "updated_at",
            postgresql_include=["search_length"],
        ),
        Index("ix_memories_scope_hash", "agent_id", "user_id", "content_hash"),
        # Memories about the same thing, found by key at any scope size (subjects.py).
        Index(
            "ix_memories_scope_key",
            "agent_id",
            "user_id",
            "name_key",
            postgresql_where=text("status = 'active' AND name_key <> ''"),
            sqlite_where=text("status = 'active' AND name_key <> ''"),
        ),
        # Maintenance sweeps read only the rows that are due, through small partial
        # indexes, so a cycle costs what changes, not the size of the store. None of
        # them holds a column that a retrieval changes, so recall's reinforcement
        # rewrites the row in place (HOT) instead of adding to every index.
        Index(
            "ix_memories_archive_due",
            "archive_due_at",
            postgresql_where=text("tier = 'long' AND status = 'active'"),
            sqlite_where=text("tier = 'long' AND status = 'active'"),
        ),
        Index(
            "ix_memories_expiry_due",
            "expires_at",
            postgresql_where=text("tier = 'short' AND status = 'active'"),
            sqlite_where=text("tier = 'short' AND status = 'active'"),
        ),
        Index(
            "ix_memories_promotion_due",
            "promotable_at",
            postgresql_where=text(
                "tier = 'short' AND status = 'active' AND promotable_at IS NOT NULL"
            ),
            sqlite_where=text("tier = 'short' AND status = 'active' AND promotable_at IS NOT NULL"),
        ),
        # The embedding cache's stamp (count, id sum and vector_version sum of a scope's
        # embedded memories) as an index-only scan, not a read of every row.
        Index(
            "ix_memories_scope_vectors",
            "agent_id",
            "user_id",
            "id",
            "vector_version",
            postgresql_where=text("status = 'active' AND vector IS NOT NULL"),
            sqlite_where=text("status = 'active' AND vector IS NOT NULL"),
        ),
        # Vectors another model wrote (or written before models were named), walked by
        # the fill model by model (recall/backfill.py), without a scan.
        Index(
            "ix_memories_vector_model",
            "vector_model_id",
            "id",
            postgresql_where=text("status = 'active' AND vector IS NOT NULL"),
            sqlite_where=text("status = 'active' AND vector IS NOT NULL"),
        ),
        # Deleted memories due for purging (maintenance/retention.py::purge_deleted).
        Index(
            "ix_memories_deleted",
            "updated_at",
            postgresql_where=text("status = 'deleted'"),
            sqlite_where=text("status = 'deleted'"),
        ),
        # Archived memories due for purging (maintenance/retention.py).
        Index(
            "ix_memories_archived",
            "archived_at",
            postgresql_where=text("status = 'archived'"),
            sqlite_where=text("status = 'archived'"),
        ),
        # What the embedding fill reads (recall/backfill.py), without a scan.
        Index(
            "ix_memories_unembedded",
            "id",
            postgresql_where=text("status = 'active' AND vector IS NULL"),
            sqlite_where=text("status = 'active' AND vector IS NULL"),
        ),
        # The conflicts list, newest first, and its count (memories/conflicts.py),
        # without a scan or a sort of every superseded memory kept.
        Index(
            "ix_memories_superseded",
            "updated_at",
            "id",
            postgresql_where=text("status = 'superseded'"),
            sqlite_where=text("status = 'superseded'"),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    agent_id: Mapped[str] = mapped_column(String(200))
    user_id: Mapped[str] = mapped_column(String(200))
    category: Mapped[str] = mapped_column(String(20))
    tier: Mapped[str] = mapped_column(String(10))
    status: Mapped[str] = mapped_column(String(12), default=MemoryStatus.ACTIVE)
    name: Mapped[str] = mapped_column(String(200))
    # The name's subject key (memories/subjects.py), '' when the name is no real key.
    name_key: Mapped[str] = mapped_column(String(200), default="", server_default="")
    content: Mapped[str] = mapped_column(Text)
    tags: Mapped[list[str]] = mapped_column(JSON, default=list)
    confidence: Mapped[float] = mapped_column(Float)
    weight: Mapped[float] = mapped_column(Float, default=1.0)
    weight_at: Mapped[datetime]
    # Never later than the moment the decayed weight of a long-tier memory reaches
    # archive_threshold: set_weight derives it exactly, recall's reinforcement only
    # postpones that moment and leaves the column be, and the archive sweep re-derives
    # it before archiving (maintenance/cycle.py).
    archive_due_at: Mapped[datetime | None]
    evidence_count: Mapped[int] = mapped_column(Integer, default=1)
    access_count: Mapped[int] = mapped_column(Integer, default=0)
    last_accessed_at: Mapped[datetime | None]
    # When a short-tier memory's retrievals reached promote_access_count: the promotion
    # sweep's index, written once, where access_count would change on every recall.
    promotable_at: Mapped[datetime | None]
    expires_at: Mapped[datetime | None]
    content_hash: Mapped[str] = mapped_column(String(64))
    # Index terms of name + content (text.search_text); database triggers copy them into
    # memory_terms while the memory is active (migration 0008).
    search_text: Mapped[str] = mapped_column(Text, default="", server_default="")
    search_length: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Embedding as float32 bytes, filled off the chat path when embeddings are on.
    vector: Mapped[bytes | None] = mapped_column(LargeBinary)
    # How many vectors were written to this memory: every write that sets `vector` adds
    # one, so the per-process scope cache sees a rewritten vector (recall/scope_vectors.py).
    vector_version: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # The vector_models row of the model that wrote `vector`; None for a vector written
    # before models were named, which the fill embeds again and recall still compares.
    vector_model_id: Mapped[int | None] = mapped_column(Integer)
    # Fills the embedding endpoint refused this text in; past embedding_max_attempts
    # the fill leaves it out until the text changes (recall/backfill.py).
    embed_failures: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    supersedes_id: Mapped[int | None] = mapped_column(BigInteger)
    superseded_by_id: Mapped[int | None] = mapped_column(BigInteger)
    source_turn_ids: Mapped[list[int]] = mapped_column(JSON, default=list)
    # When the newest turn behind the memory was said (the turn's own timestamp; the
    # time of the call for direct saves). Replacement compares it, so a re-driven old
    # turn never retires a fact said after it. NULL on rows older than 0009: created_at.
    said_at: Mapped[datetime | None]
    # The day an episode happened (midnight UTC of that date), when the turn told it.
    occurred_at: Mapped[datetime | None]
    metadata_: Mapped[dict[str, Any] | None] = mapped_column("metadata", JSON)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    archived_at: Mapped[datetime | None]


class MemoryTerm(Scoped, Base):
    """Postings of the keyword index: which active memory holds a term, how often, and
    how many terms that memory has. Kept by database triggers from memories.search_text
    and search_length, read per scope for BM25."""

    __tablename__ = "memory_terms"
    __table_args__ = (
        # BM25 reads a scope's postings of the query's terms from this index alone
        # (PostgreSQL: an index-only scan), without visiting the postings or memories.
        PrimaryKeyConstraint(
            "agent_id",
            "user_id",
            "term",
            "memory_id",
            postgresql_include=["tf", "search_length"],
        ),
        Index("ix_memory_terms_memory", "memory_id"),
    )

    agent_id: Mapped[str] = mapped_column(String(200))
    user_id: Mapped[str] = mapped_column(String(200))
    term: Mapped[str] = mapped_column(String(64))
    memory_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("memories.id", ondelete="CASCADE")
    )
    tf: Mapped[int] = mapped_column(Integer)
    search_length: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class MemoryEvent(Scoped, Base):
    __tablename__ = "memory_events"
    __table_args__ = (Index("ix_memory_events_memory", "memory_id", "id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    memory_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("memories.id", ondelete="CASCADE")
    )
    agent_id: Mapped[str] = mapped_column(String(200))
    user_id: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(12))
    actor: Mapped[str] = mapped_column(String(12))
    before_content: Mapped[str | None] = mapped_column(Text)
    after_content: Mapped[str | None] = mapped_column(Text)
    batch_id: Mapped[int | None] = mapped_column(BigInteger)
    detail: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime]


class MemoryUsage(Scoped, Base):
    __tablename__ = "memory_usage"
    __table_args__ = (
        Index("ix_memory_usage_memory", "memory_id"),
        # A scope's own recalls, of shared memories too: what erasing that user removes.
        Index("ix_memory_usage_scope", "agent_id", "user_id", "id"),
        # The rows maintenance has yet to fold into their memories (maintenance/usage.py).
        Index(
            "ix_memory_usage_unfolded",
            "id",
            postgresql_where=text("NOT folded"),
            sqlite_where=text("NOT folded"),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    memory_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("memories.id", ondelete="CASCADE")
    )
    agent_id: Mapped[str] = mapped_column(String(200))
    user_id: Mapped[str] = mapped_column(String(200))  # who asked (0018: before, the memory's)
    session_id: Mapped[str | None] = mapped_column(String(200))
    query: Mapped[str] = mapped_column(Text)
    score: Mapped[float | None] = mapped_column(Float)
    referenced: Mapped[bool] = mapped_column(default=False, server_default=text("false"))
    created_at: Mapped[datetime]
    # A recall appends its row and changes no memory; maintenance folds the row into its
    # memory's weight and access columns, then marks it folded (maintenance/usage.py).
    folded: Mapped[bool] = mapped_column(default=False, server_default=text("false"))


class ExtractionBatch(Scoped, Base):
    __tablename__ = "extraction_batches"
    __table_args__ = (
        Index("ix_extraction_batches_session", "agent_id", "user_id", "session_id", "id"),
        Index("ix_extraction_batches_status", "status", "started_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    agent_id: Mapped[str] = mapped_column(String(200))
    user_id: Mapped[str] = mapped_column(String(200))
    session_id: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(12), default="extract")
    status: Mapped[str] = mapped_column(String(10), default=BatchStatus.RUNNING)
    first_turn_id: Mapped[int | None] = mapped_column(BigInteger)
    last_turn_id: Mapped[int | None] = mapped_column(BigInteger)
    turn_count: Mapped[int] = mapped_column(Integer, default=0)
    extractor: Mapped[str | None] = mapped_column(String(20))
    model: Mapped[str | None] = mapped_column(String(200))
    prompt_version: Mapped[str | None] = mapped_column(String(50))
    tokens_in: Mapped[int] = mapped_column(Integer, default=0)
    tokens_out: Mapped[int] = mapped_column(Integer, default=0)
    llm_calls: Mapped[int] = mapped_column(Integer, default=0)
    facts_proposed: Mapped[int] = mapped_column(Integer, default=0)
    facts_accepted: Mapped[int] = mapped_column(Integer, default=0)
    facts_rejected: Mapped[int] = mapped_column(Integer, default=0)
    rejections: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    memories_created: Mapped[int] = mapped_column(Integer, default=0)
    memories_confirmed: Mapped[int] = mapped_column(Integer, default=0)
    memories_superseded: Mapped[int] = mapped_column(Integer, default=0)
    profile_updates: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Turns cut to fit extract_max_prompt_tokens (their full text stays in `turns`).
    truncated_turns: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    duration_ms: Mapped[float | None] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text)
    # Why a failed batch failed: transient (outage, retried without limit), permanent
    # (counts toward max_attempts) or bug (an unexpected exception, counts too).
    error_kind: Mapped[str | None] = mapped_column(String(12))


class Circuit(Base):
    """Shared breaker state of an outside service (the LLM endpoint), so that every worker
    stops calling it while it is down and one probe finds out when it is back."""

    __tablename__ = "circuits"

    name: Mapped[str] = mapped_column(String(50), primary_key=True)
    # Consecutive transient failures; the circuit opens at circuit_failure_threshold.
    failures: Mapped[int] = mapped_column(Integer, default=0)
    # No call before this (database clock); past it, one caller at a time probes.
    open_until: Mapped[datetime | None]
    updated_at: Mapped[datetime]


class VectorModel(Base):
    """An embedding model that wrote vectors. A memory names the one that wrote its
    vector (vector_model_id), so a vector is compared only with a question that model
    embedded, and the fill finds the vectors another model wrote (recall/vector_model.py)."""

    __tablename__ = "vector_models"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    # "<provider>:<model>", a bundled model by its package and runtime (Bundled.name).
    name: Mapped[str] = mapped_column(Text, unique=True)
    first_used_at: Mapped[datetime]


# Every table, wherever it is defined, is reachable from here (and registered on Base's
# metadata, which Alembic compares with the migrations).
from memoryd.models.conversation_tables import ChatSession, SessionSegment, Turn  # noqa: E402
from memoryd.models.key_tables import KeyAlias, SubjectKey  # noqa: E402
from memoryd.models.lifecycle_tables import BatchTotal, Erasure, MemoryTally  # noqa: E402
from memoryd.models.profile_tables import Profile, ProfileEvent  # noqa: E402
from memoryd.models.server_tables import (  # noqa: E402
    AgentConfig,
    ApiKey,
    ConflictReview,
    PageSession,
)
