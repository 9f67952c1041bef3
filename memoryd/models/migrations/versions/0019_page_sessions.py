"""page sessions: the page's cookie is a session, no longer the admin key itself

Signing in exchanges the key for a random session token (stored as SHA-256) that
expires, that signing out deletes and that revoking the key ends.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "page_sessions",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("key_id", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["key_id"],
            ["api_keys.id"],
            name=op.f("fk_page_sessions_key_id_api_keys"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_page_sessions")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_page_sessions_token_hash")),
    )
    op.create_index(op.f("ix_page_sessions_key_id"), "page_sessions", ["key_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_page_sessions_key_id"), table_name="page_sessions")
    op.drop_table("page_sessions")
