"""memoryd serve: API keys, per-agent settings, conflict reviews, dead-letter index

Revision ID: 0006
Revises: 0004
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("prefix", sa.String(length=20), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("agent_ids", sa.JSON(), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=True),
        sa.Column("admin", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
    )
    op.create_table(
        "agent_settings",
        sa.Column("agent_id", sa.String(length=200), nullable=False),
        sa.Column("memory_enabled", sa.Boolean(), nullable=True),
        sa.Column("prefetch_limit", sa.Integer(), nullable=True),
        sa.Column("context_token_budget", sa.Integer(), nullable=True),
        sa.Column("memory_categories", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("inject_min_score", sa.Float(), nullable=True),
        sa.Column("inject_max_items", sa.Integer(), nullable=True),
        sa.Column("inject_tiers", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("agent_id", name=op.f("pk_agent_settings")),
    )
    op.create_table(
        "conflict_reviews",
        sa.Column("memory_id", sa.BigInteger(), nullable=False),
        sa.Column("superseded_by_id", sa.BigInteger(), nullable=False),
        sa.Column("kept_id", sa.BigInteger(), nullable=False),
        sa.Column("reviewed_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["memory_id"],
            ["memories.id"],
            name=op.f("fk_conflict_reviews_memory_id_memories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("memory_id", "superseded_by_id", name=op.f("pk_conflict_reviews")),
    )
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.create_index(
            "ix_turns_failed",
            ["agent_id", "user_id", "session_id"],
            unique=False,
            postgresql_where=sa.text("status = 'failed'"),
            sqlite_where=sa.text("status = 'failed'"),
        )


def downgrade() -> None:
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.drop_index("ix_turns_failed")
    op.drop_table("conflict_reviews")
    op.drop_table("agent_settings")
    op.drop_table("api_keys")
