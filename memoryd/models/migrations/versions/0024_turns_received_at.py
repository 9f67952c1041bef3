"""turns received_at: the backlog ages from when memoryd received a turn

The backlog gauge read each pending turn's created_at, which is the sender's timestamp
when it sends one: an import of turns said two days ago showed a two-day backlog. Turns
now keep when memoryd received them, and the gauge reads the partial index of pending
turns by that time.

When earlier turns were received was not recorded. Ids grow as turns arrive, and a turn
was received no earlier than the turns stored before it were said: each turn still in
the pipeline (pending, claimed, dead-lettered and re-drivable) gets the latest timestamp
of the turns up to its own id, never later than the upgrade. An import waiting at the
upgrade so ages from the turns that came before it, not from its own old timestamp.
Turns done with (done, skipped) keep the upgrade's time: nothing reads it for them, and
filling them would rewrite the whole table while ingest waits.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-27
"""

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from memoryd.models.base import UTCDateTime

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Every existing row gets the upgrade's time first: on PostgreSQL a default evaluated
# once, kept in the catalogue (no rewrite); SQLite copies the table to add the column.
_FILL_IN_PIPELINE = """
UPDATE turns SET received_at = CASE WHEN seen.said < :upgrade THEN seen.said ELSE :upgrade END
FROM (
    SELECT id, status, max(created_at) OVER (ORDER BY id) AS said FROM turns
) AS seen
WHERE turns.id = seen.id AND seen.status NOT IN ('done', 'skipped')
"""


def upgrade() -> None:
    # SQLite adds no column with a default that is not a constant: it copies the table.
    sqlite = op.get_bind().dialect.name == "sqlite"
    with op.batch_alter_table("turns", recreate="always" if sqlite else "auto") as batch:
        batch.add_column(
            sa.Column(
                "received_at",
                sa.DateTime(timezone=True),
                server_default=sa.func.now(),
                nullable=False,
            )
        )
    upgraded = datetime.now(UTC)
    op.execute(
        sa.text(_FILL_IN_PIPELINE).bindparams(
            sa.bindparam("upgrade", upgraded, type_=UTCDateTime())
        )
    )
    op.create_index(
        "ix_turns_pending_received",
        "turns",
        ["received_at"],
        postgresql_where=sa.text("status = 'pending'"),
        sqlite_where=sa.text("status = 'pending'"),
    )


def downgrade() -> None:
    op.drop_index("ix_turns_pending_received", table_name="turns")
    with op.batch_alter_table("turns") as batch:
        batch.drop_column("received_at")
