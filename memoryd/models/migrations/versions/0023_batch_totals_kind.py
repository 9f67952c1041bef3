"""batch totals per kind: extraction and compression runs counted apart

Both record their runs as batches; the totals and the Prometheus counters now say
which is which. Totals kept so far were all counted as extraction.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("batch_totals", recreate="always") as batch:
        batch.add_column(
            sa.Column("kind", sa.String(length=12), server_default="extract", nullable=False)
        )
        batch.drop_constraint("pk_batch_totals", type_="primary")
        batch.create_primary_key("pk_batch_totals", ["status", "kind"])
    with op.batch_alter_table("batch_totals") as batch:
        batch.alter_column("kind", server_default=None)


def downgrade() -> None:
    # Extraction and compression totals of one status become one row again.
    op.execute(
        """
        UPDATE batch_totals SET kind = 'extract'
        WHERE kind <> 'extract' AND NOT EXISTS (
            SELECT 1 FROM batch_totals t WHERE t.status = batch_totals.status
              AND t.kind = 'extract')
        """
    )
    op.execute("DELETE FROM batch_totals WHERE kind <> 'extract'")
    with op.batch_alter_table("batch_totals", recreate="always") as batch:
        batch.drop_constraint("pk_batch_totals", type_="primary")
        batch.create_primary_key("pk_batch_totals", ["status"])
        batch.drop_column("kind")
