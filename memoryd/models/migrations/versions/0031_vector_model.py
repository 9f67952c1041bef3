"""vector_models: each memory names the embedding model that wrote its vector

Two models can give vectors of one size and unrelated meaning (MiniLM and e5, 384
dimensions each), so a model change used to need `memoryd embed --reset` before recall
compared anything. Vectors written before this revision name no model: recall keeps
comparing them, as before, and the fill embeds them again under the model it runs.

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

EMBEDDED = "status = 'active' AND vector IS NOT NULL"


def upgrade() -> None:
    op.create_table(
        "vector_models",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("first_used_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_vector_models")),
        sa.UniqueConstraint("name", name=op.f("uq_vector_models_name")),
    )
    op.add_column("memories", sa.Column("vector_model_id", sa.Integer(), nullable=True))
    op.create_index(
        "ix_memories_vector_model",
        "memories",
        ["vector_model_id", "id"],
        postgresql_where=sa.text(EMBEDDED),
        sqlite_where=sa.text(EMBEDDED),
    )


def downgrade() -> None:
    op.drop_index("ix_memories_vector_model", table_name="memories")
    # A plain ALTER TABLE on both databases: SQLite's batch mode would rebuild the table
    # and lose the keyword index's triggers.
    op.drop_column("memories", "vector_model_id")
    op.drop_table("vector_models")
