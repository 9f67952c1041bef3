"""postings that BM25 reads alone: each carries its memory's search_length

A recall's keyword list joined every posting of the query's terms to its memory row,
only to read the row's length: for a heavy user about 165 rows from all over the
memories table, each likely a page read. The postings now carry the length, and on
PostgreSQL the primary key index includes tf and search_length, so the scope's postings
are an index-only scan; only the best fifty memories are read by id afterwards. The
triggers fill the new column; existing postings are rebuilt.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memoryd.models import search_index

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_KEY = "agent_id, user_id, term, memory_id"


def _primary_key(include: str) -> None:
    op.execute(
        "ALTER TABLE memory_terms DROP CONSTRAINT pk_memory_terms, "
        f"ADD CONSTRAINT pk_memory_terms PRIMARY KEY ({_KEY}){include}"
    )


def upgrade() -> None:
    bind = op.get_bind()
    op.execute("DELETE FROM memory_terms")  # rebuilt below, with their lengths
    with op.batch_alter_table("memory_terms", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("search_length", sa.Integer(), server_default="0", nullable=False)
        )
    if bind.dialect.name == "postgresql":
        _primary_key(" INCLUDE (tf, search_length)")
    search_index.install(bind)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        _primary_key("")  # the column cannot leave while the key includes it
    else:
        search_index.uninstall(bind)  # SQLite's triggers name the column
    with op.batch_alter_table("memory_terms", schema=None) as batch_op:
        batch_op.drop_column("search_length")
    search_index.install(bind, lengths=False)
