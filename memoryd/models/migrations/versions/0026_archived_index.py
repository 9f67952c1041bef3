"""archived memories found without a scan: a partial index on archived_at

Archived memories are purged after `archived_retention_days`, read through this index,
so the retention step costs the memories it removes, not the store.

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ARCHIVED = "status = 'archived'"


def upgrade() -> None:
    op.create_index(
        "ix_memories_archived",
        "memories",
        ["archived_at"],
        postgresql_where=sa.text(ARCHIVED),
        sqlite_where=sa.text(ARCHIVED),
    )


def downgrade() -> None:
    op.drop_index("ix_memories_archived", table_name="memories")
