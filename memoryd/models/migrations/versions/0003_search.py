"""search: keyword index over memories (PostgreSQL tsvector GIN, SQLite FTS5)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memoryd.models import search_index
from memoryd.text import search_text

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BACKFILL_CHUNK = 5000

SQLITE_TRIGGERS = search_index.FTS_LEGACY_TRIGGERS


def _backfill() -> None:
    """Index terms for memories written before this migration, in chunks."""
    bind = op.get_bind()
    last = 0
    while True:
        rows = bind.execute(
            sa.text("SELECT id, name, content FROM memories WHERE id > :last ORDER BY id LIMIT :n"),
            {"last": last, "n": BACKFILL_CHUNK},
        ).all()
        if not rows:
            return
        bind.execute(
            sa.text("UPDATE memories SET search_text = :t WHERE id = :id"),
            [{"id": r.id, "t": search_text(f"{r.name} {r.content}")} for r in rows],
        )
        last = rows[-1].id


def upgrade() -> None:
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.add_column(sa.Column("search_text", sa.Text(), server_default="", nullable=False))
        batch_op.add_column(sa.Column("embedding", sa.JSON(), nullable=True))
    _backfill()
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
