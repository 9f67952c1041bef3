"""embedding failures: a memory the endpoint refuses no longer stalls the fill

The fill took the oldest unembedded memories and stopped at the first error, so one
text the model refused (too long, say) was sent again every sweep and no later memory
was ever embedded. Each memory now counts the fills that failed on it
(`embed_failures`); past `embedding_max_attempts` it is left out until its text changes.
The fill reads unembedded memories through a partial index instead of scanning.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UNEMBEDDED = "status = 'active' AND vector IS NULL"


def upgrade() -> None:
    op.add_column(
        "memories",
        sa.Column("embed_failures", sa.Integer(), nullable=False, server_default="0"),
    )
    op.create_index(
        "ix_memories_unembedded",
        "memories",
        ["id"],
        postgresql_where=sa.text(UNEMBEDDED),
        sqlite_where=sa.text(UNEMBEDDED),
    )


def downgrade() -> None:
    op.drop_index("ix_memories_unembedded", table_name="memories")
    op.drop_column("memories", "embed_failures")
