"""compress_due: compression finds its sessions through an index, not by summing turns

Compression used to group every turn of every session not compressed since its last
activity, every run. Now a batch that takes a session past compress_trigger_tokens
marks it, and compression reads the partial index of marked sessions. Sessions due now
are marked here, against the trigger configured when the migration runs.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memoryd.settings import Settings

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(
            sa.Column("compress_due", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
    op.create_index(
        "ix_sessions_compress_due",
        "sessions",
        ["agent_id", "user_id", "session_id"],
        postgresql_where=sa.text("compress_due"),
        sqlite_where=sa.text("compress_due = 1"),
    )
    settings = op.get_context().config.attributes.get("settings") or Settings()
    op.execute(
        sa.text(
            """
            UPDATE sessions SET compress_due = true
            WHERE (compressed_at IS NULL OR last_activity_at > compressed_at)
              AND (
                SELECT coalesce(sum(t.token_count), 0) FROM turns t
                WHERE t.agent_id = sessions.agent_id AND t.user_id = sessions.user_id
                  AND t.session_id = sessions.session_id
                  AND t.id > coalesce(sessions.summary_upto, 0)
              ) > :trigger
            """
        ).bindparams(trigger=settings.maintenance.compress_trigger_tokens)
    )


def downgrade() -> None:
    op.drop_index("ix_sessions_compress_due", table_name="sessions")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("compress_due")
