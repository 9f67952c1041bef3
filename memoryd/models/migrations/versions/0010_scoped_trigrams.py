"""scoped trigram index: a GiST index led by the scope's columns (PostgreSQL)

The GIN trigram index covered the whole table: a lookup read each common trigram's
posting list across all users and rechecked every row that passed, so recall slowed as
the store grew (about 80 ms at p95 on a million memories). The GiST index is led by
agent_id and user_id (btree_gist) and answers "the scope's memories nearest the query"
in distance order, reading only as many rows as it returns. SQLite is unchanged.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23
"""

from collections.abc import Sequence

from alembic import op

from memoryd.models import search_index

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_GLOBAL_INDEX = (
    "CREATE INDEX IF NOT EXISTS ix_memories_trgm ON memories "
    "USING gin ((name || ' ' || content) gin_trgm_ops)"
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gist")
    op.execute(search_index.PG_TRIGRAM_INDEX)
    op.execute("DROP INDEX IF EXISTS ix_memories_trgm")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_GLOBAL_INDEX)
    op.execute("DROP INDEX IF EXISTS ix_memories_scope_trgm")
