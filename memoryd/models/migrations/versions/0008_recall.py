"""recall: BM25 postings kept by triggers, trigram similarity in the database, float32
vectors

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memoryd.models import search_index

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:
        op.execute("DROP INDEX IF EXISTS ix_memories_search")
    else:
        for name in ("insert", "delete", "update"):
            op.execute(f"DROP TRIGGER IF EXISTS memories_fts_{name}")
        op.execute("DROP TABLE IF EXISTS memories_fts")
    op.create_table(
        "memory_terms",
        sa.Column("agent_id", sa.String(length=200), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("term", sa.String(length=64), nullable=False),
        sa.Column("memory_id", sa.BigInteger(), nullable=False),
        sa.Column("tf", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["memory_id"],
            ["memories.id"],
            name=op.f("fk_memory_terms_memory_id_memories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "agent_id", "user_id", "term", "memory_id", name=op.f("pk_memory_terms")
        ),
    )
    op.create_index("ix_memory_terms_memory", "memory_terms", ["memory_id"], unique=False)
    # Old vectors were JSON floats from whichever model was configured: they are dropped
    # and re-embedded as float32 bytes by the next fill.
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("search_length", sa.Integer(), server_default="0", nullable=False)
        )
        batch_op.add_column(sa.Column("vector", sa.LargeBinary(), nullable=True))
        batch_op.drop_column("embedding")
    search_index.reindex_terms(op.get_bind())
    if postgres:
        op.drop_index("ix_memories_scope_status", table_name="memories")
        op.create_index(
            "ix_memories_scope_status",
            "memories",
            ["agent_id", "user_id", "status", "updated_at"],
            postgresql_include=["search_length"],
        )
    search_index.install(op.get_bind(), lengths=False)


def downgrade() -> None:
    search_index.uninstall(op.get_bind())
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("ix_memories_scope_status", table_name="memories")
        op.create_index(
            "ix_memories_scope_status", "memories", ["agent_id", "user_id", "status", "updated_at"]
        )
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.add_column(sa.Column("embedding", sa.JSON(), nullable=True))
        batch_op.drop_column("vector")
        batch_op.drop_column("search_length")
    op.drop_index("ix_memory_terms_memory", table_name="memory_terms")
    op.drop_table("memory_terms")
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
        for trigger in search_index.FTS_LEGACY_TRIGGERS:
            op.execute(trigger)
        op.execute("INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')")
