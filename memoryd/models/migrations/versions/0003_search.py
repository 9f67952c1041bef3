"""search: keyword index over memories (PostgreSQL tsvector GIN, SQLite FTS5)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memoryd.models import search_index

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SQLITE_TRIGGERS = search_index.FTS_LEGACY_TRIGGERS


def upgrade() -> None:
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.add_column(sa.Column("search_text", sa.Text(), server_default="", nullable=False))
        batch_op.add_column(sa.Column("embedding", sa.JSON(), nullable=True))
    # Terms of rows written before this migration are computed by 0008, which re-derives
    # every memory's terms.
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE INDEX ix_memories_search ON memories "
            "USING gin (to_tsvector('simple', search_text))"
        )
    else:
        op.execute(
            "CREATE VIRTUAL TABLE memories_fts USING fts5("
            "search_text, content='memories', content_rowid='id')"
        )
        for trigger in SQLITE_TRIGGERS:
            op.execute(trigger)
        op.execute("INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_memories_search")
    else:
        for name in ("insert", "delete", "update"):
            op.execute(f"DROP TRIGGER IF EXISTS memories_fts_{name}")
        op.execute("DROP TABLE IF EXISTS memories_fts")
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.drop_column("embedding")
        batch_op.drop_column("search_text")
