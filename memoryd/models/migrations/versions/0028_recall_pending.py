"""per-agent recall of pending turns: agent_settings.recall_pending

An agent may turn off what recall shows of the turns not yet extracted (recall/pending.py);
null takes MEMORYD_RECALL_PENDING.

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("agent_settings") as batch:
        batch.add_column(sa.Column("recall_pending", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("agent_settings") as batch:
        batch.drop_column("recall_pending")
