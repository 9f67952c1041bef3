"""turns without a turn_key stay out of the turn_key index

The unique index on (agent_id, user_id, turn_key) held an entry for every turn, most of
them with no key: NULL never conflicts, so those entries only cost a write per turn
(about a tenth of a bulk enqueue on PostgreSQL). It now holds the keyed turns only; the
upserts name its predicate. SQLite keeps a table's UNIQUE constraint in the table, so it
copies the table once to drop it.

Revision ID: 0030
Revises: 0029
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0030"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = "uq_turns_scope_key"
COLUMNS = ["agent_id", "user_id", "turn_key"]
KEYED = "turn_key IS NOT NULL"


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    with op.batch_alter_table("turns", recreate="always" if sqlite else "auto") as batch:
        batch.drop_constraint(NAME, type_="unique")
    op.create_index(
        NAME,
        "turns",
        COLUMNS,
        unique=True,
        postgresql_where=sa.text(KEYED),
        sqlite_where=sa.text(KEYED),
    )


def downgrade() -> None:
    op.drop_index(NAME, table_name="turns")
    with op.batch_alter_table("turns") as batch:
        batch.create_unique_constraint(NAME, COLUMNS)
