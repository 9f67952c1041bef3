"""subject keys: each scope's keys with their counts, and the aliases learnt between them

Triggers on memories append a row per memory arriving at or leaving a subject key; the
maintenance cycle folds them. Started here from the memories stored.

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memoryd.models import key_index

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "subject_keys",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("agent_id", sa.String(length=200), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("name_key", sa.String(length=200), nullable=False),
        sa.Column("active", sa.Integer(), nullable=False),
        sa.Column("held", sa.Integer(), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("folded", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subject_keys")),
    )
    op.create_index("ix_subject_keys_scope", "subject_keys", ["agent_id", "user_id", "name_key"])
    op.create_index(
        "ix_subject_keys_unfolded",
        "subject_keys",
        ["id"],
        postgresql_where=sa.text("NOT folded"),
        sqlite_where=sa.text("NOT folded"),
    )
    op.create_table(
        "key_aliases",
        sa.Column("agent_id", sa.String(length=200), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("alias", sa.String(length=200), nullable=False),
        sa.Column("name_key", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("agent_id", "user_id", "alias", name=op.f("pk_key_aliases")),
    )
    key_index.install(op.get_bind())


def downgrade() -> None:
    key_index.uninstall(op.get_bind())
    op.drop_table("key_aliases")
    op.drop_index("ix_subject_keys_unfolded", table_name="subject_keys")
    op.drop_index("ix_subject_keys_scope", table_name="subject_keys")
    op.drop_table("subject_keys")
