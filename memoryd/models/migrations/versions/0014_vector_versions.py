"""vector versions: the embedding cache sees every rewritten vector

Each process caches a scope's vectors and checked them by the count and id sum of the
scope's embedded memories. An edit clears a vector and the next fill writes a new one
under the same id, and `embed --reset` rewrites them all: count and ids stay the same,
so recall kept ranking by the old vectors until the process restarted. Each memory now
counts the vectors written to it (`vector_version`), and the cache's stamp adds their
sum. The scope's vector index carries the column, so the stamp stays an index-only read.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_EMBEDDED = "status = 'active' AND vector IS NOT NULL"
_PARTIAL = {"postgresql_where": sa.text(_EMBEDDED), "sqlite_where": sa.text(_EMBEDDED)}


def upgrade() -> None:
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("vector_version", sa.Integer(), server_default="0", nullable=False)
        )
    op.drop_index("ix_memories_scope_vectors", table_name="memories")
    op.create_index(
        "ix_memories_scope_vectors",
        "memories",
        ["agent_id", "user_id", "id", "vector_version"],
        **_PARTIAL,
    )


def downgrade() -> None:
    op.drop_index("ix_memories_scope_vectors", table_name="memories")
    op.create_index(
        "ix_memories_scope_vectors", "memories", ["agent_id", "user_id", "id"], **_PARTIAL
    )
    # A plain ALTER TABLE on both databases: SQLite's batch mode would rebuild the table
    # and lose the keyword index's triggers.
    op.drop_column("memories", "vector_version")
