"""erasure: an audit row per erasure, and deleted memories found without a scan

`memoryd erase` (and the client, HTTP and page) removes every row of a scope or one
session; each request leaves an `erasures` row with a digest of the scope, never its ids
once done. Soft-deleted memories are purged after `deleted_retention_days`, read through
a partial index.

Usage rows now name the user who asked, also for a shared memory (they named the
memory's scope, `*`), and are found by scope: erasing a user removes its recalls of
shared memories too. Rows of shared memories written before cannot be traced to the
user who asked; they are dropped (each memory's counters keep what ranking needs).

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DELETED = "status = 'deleted'"
RUNNING = "finished_at IS NULL"


def upgrade() -> None:
    op.create_table(
        "erasures",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("agent_id", sa.String(200), nullable=True),
        sa.Column("user_id", sa.String(200), nullable=True),
        sa.Column("session_id", sa.String(200), nullable=True),
        sa.Column("whole_scope", sa.Boolean(), nullable=False),
        sa.Column("rows", sa.JSON(), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_erasures")),
    )
    op.create_index(op.f("ix_erasures_digest"), "erasures", ["digest"])
    op.create_index(
        "ix_erasures_running",
        "erasures",
        ["updated_at"],
        postgresql_where=sa.text(RUNNING),
        sqlite_where=sa.text(RUNNING),
    )
    op.execute("DELETE FROM memory_usage WHERE user_id = '*'")
    op.create_index("ix_memory_usage_scope", "memory_usage", ["agent_id", "user_id", "id"])
    op.create_index(
        "ix_memories_deleted",
        "memories",
        ["updated_at"],
        postgresql_where=sa.text(DELETED),
        sqlite_where=sa.text(DELETED),
    )


def downgrade() -> None:
    op.drop_index("ix_memories_deleted", table_name="memories")
    op.drop_index("ix_memory_usage_scope", table_name="memory_usage")
    op.drop_index("ix_erasures_running", table_name="erasures")
    op.drop_index(op.f("ix_erasures_digest"), table_name="erasures")
    op.drop_table("erasures")
