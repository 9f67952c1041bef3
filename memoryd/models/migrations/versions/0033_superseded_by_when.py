"""the conflicts list reads superseded memories newest first through their index

The Conflicts screen lists unreviewed replacements by when they happened (the
superseded memory's updated_at), newest first. Its partial index held ids only, so each
view read every superseded memory ever kept (history stays for good) and sorted them:
a cost that grew with the store's months. Ordered by (updated_at, id) it reads the
first page and stops; the count reads the same index as before.

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0033"
down_revision: str | None = "0032"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SUPERSEDED = sa.text("status = 'superseded'")


def _index(columns: list[str]) -> None:
    op.drop_index("ix_memories_superseded", table_name="memories")
    op.create_index(
        "ix_memories_superseded",
        "memories",
        columns,
        postgresql_where=SUPERSEDED,
        sqlite_where=SUPERSEDED,
    )


def upgrade() -> None:
    _index(["updated_at", "id"])


def downgrade() -> None:
    _index(["id"])
