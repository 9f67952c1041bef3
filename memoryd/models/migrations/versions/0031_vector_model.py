"""vector_model: which embedding model the stored vectors came from

Two models can give vectors of one size and unrelated meaning (MiniLM and e5, 384
dimensions each), so a model change used to need `memoryd embed --reset` before recall
compared anything. The first fill after this revision records the model it embeds with;
the vectors already stored are taken as that model's, as they were before.

Revision ID: 0031
Revises: 0030
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0031"
down_revision: str | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "vector_model",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("model", sa.String(length=500), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_vector_model")),
    )


def downgrade() -> None:
    op.drop_table("vector_model")
