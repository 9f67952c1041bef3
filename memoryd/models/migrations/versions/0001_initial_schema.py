"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "extraction_batches",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("agent_id", sa.String(length=200), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("session_id", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=12), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("first_turn_id", sa.BigInteger(), nullable=True),
        sa.Column("last_turn_id", sa.BigInteger(), nullable=True),
        sa.Column("turn_count", sa.Integer(), nullable=False),
        sa.Column("extractor", sa.String(length=20), nullable=True),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("prompt_version", sa.String(length=50), nullable=True),
        sa.Column("tokens_in", sa.Integer(), nullable=False),
        sa.Column("tokens_out", sa.Integer(), nullable=False),
        sa.Column("llm_calls", sa.Integer(), nullable=False),
        sa.Column("facts_proposed", sa.Integer(), nullable=False),
        sa.Column("facts_accepted", sa.Integer(), nullable=False),
        sa.Column("facts_rejected", sa.Integer(), nullable=False),
        sa.Column("rejections", sa.JSON(), nullable=True),
        sa.Column("memories_created", sa.Integer(), nullable=False),
        sa.Column("memories_confirmed", sa.Integer(), nullable=False),
        sa.Column("memories_superseded", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("duration_ms", sa.Float(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_extraction_batches")),
    )
    with op.batch_alter_table("extraction_batches", schema=None) as batch_op:
        batch_op.create_index(
            "ix_extraction_batches_session",
            ["agent_id", "user_id", "session_id", "id"],
            unique=False,
        )
        batch_op.create_index(
            "ix_extraction_batches_status", ["status", "started_at"], unique=False
        )

    op.create_table(
        "memories",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("agent_id", sa.String(length=200), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("category", sa.String(length=20), nullable=False),
        sa.Column("tier", sa.String(length=10), nullable=False),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.Column("weight_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("evidence_count", sa.Integer(), nullable=False),
        sa.Column("access_count", sa.Integer(), nullable=False),
        sa.Column("last_accessed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("supersedes_id", sa.BigInteger(), nullable=True),
        sa.Column("superseded_by_id", sa.BigInteger(), nullable=True),
        sa.Column("source_turn_ids", sa.JSON(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("archived_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memories")),
    )
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.create_index(
            "ix_memories_scope_hash", ["agent_id", "user_id", "content_hash"], unique=False
        )
        batch_op.create_index(
            "ix_memories_scope_status",
            ["agent_id", "user_id", "status", "updated_at"],
            unique=False,
        )

    op.create_table(
        "sessions",
        sa.Column("agent_id", sa.String(length=200), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("session_id", sa.String(length=200), nullable=False),
        sa.Column("last_activity_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("pending_count", sa.Integer(), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lease_batch_id", sa.BigInteger(), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("summary_upto", sa.BigInteger(), nullable=True),
        sa.Column("compressed_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("agent_id", "user_id", "session_id", name=op.f("pk_sessions")),
    )
    op.create_table(
        "turns",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("turn_key", sa.String(length=200), nullable=True),
        sa.Column("agent_id", sa.String(length=200), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("session_id", sa.String(length=200), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("batch_id", sa.BigInteger(), nullable=True),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_turns")),
        sa.UniqueConstraint("agent_id", "user_id", "turn_key", name="uq_turns_scope_key"),
    )
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.create_index(
            "ix_turns_batch",
            ["batch_id"],
            unique=False,
            postgresql_where=sa.text("batch_id IS NOT NULL"),
            sqlite_where=sa.text("batch_id IS NOT NULL"),
        )
        batch_op.create_index(
            "ix_turns_pending",
            ["agent_id", "user_id", "session_id", "id"],
            unique=False,
            postgresql_where=sa.text("status = 'pending'"),
            sqlite_where=sa.text("status = 'pending'"),
        )
        batch_op.create_index(
            "ix_turns_session", ["agent_id", "user_id", "session_id", "id"], unique=False
        )

    op.create_table(
        "memory_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("memory_id", sa.BigInteger(), nullable=False),
        sa.Column("agent_id", sa.String(length=200), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=12), nullable=False),
        sa.Column("actor", sa.String(length=12), nullable=False),
        sa.Column("before_content", sa.Text(), nullable=True),
        sa.Column("after_content", sa.Text(), nullable=True),
        sa.Column("batch_id", sa.BigInteger(), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["memory_id"],
            ["memories.id"],
            name=op.f("fk_memory_events_memory_id_memories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_events")),
    )
    with op.batch_alter_table("memory_events", schema=None) as batch_op:
        batch_op.create_index("ix_memory_events_memory", ["memory_id", "id"], unique=False)

    op.create_table(
        "memory_usage",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("memory_id", sa.BigInteger(), nullable=False),
        sa.Column("agent_id", sa.String(length=200), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("session_id", sa.String(length=200), nullable=True),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("referenced", sa.Boolean(), server_default=sa.text("(false)"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["memory_id"],
            ["memories.id"],
            name=op.f("fk_memory_usage_memory_id_memories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_usage")),
    )
    with op.batch_alter_table("memory_usage", schema=None) as batch_op:
        batch_op.create_index("ix_memory_usage_memory", ["memory_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("memory_usage", schema=None) as batch_op:
        batch_op.drop_index("ix_memory_usage_memory")

    op.drop_table("memory_usage")
    with op.batch_alter_table("memory_events", schema=None) as batch_op:
        batch_op.drop_index("ix_memory_events_memory")

    op.drop_table("memory_events")
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.drop_index("ix_turns_session")
        batch_op.drop_index(
            "ix_turns_pending",
            postgresql_where=sa.text("status = 'pending'"),
            sqlite_where=sa.text("status = 'pending'"),
        )
        batch_op.drop_index(
            "ix_turns_batch",
            postgresql_where=sa.text("batch_id IS NOT NULL"),
            sqlite_where=sa.text("batch_id IS NOT NULL"),
        )

    op.drop_table("turns")
    op.drop_table("sessions")
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.drop_index("ix_memories_scope_status")
        batch_op.drop_index("ix_memories_scope_hash")

    op.drop_table("memories")
    with op.batch_alter_table("extraction_batches", schema=None) as batch_op:
        batch_op.drop_index("ix_extraction_batches_status")
        batch_op.drop_index("ix_extraction_batches_session")

    op.drop_table("extraction_batches")
