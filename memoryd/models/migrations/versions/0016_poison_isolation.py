"""poison isolation: a failing batch is split until the turn that fails stands alone

A batch that failed for good (a permanent error or a bug) counted an attempt on every
one of its turns and dead-lettered them all together, good turns with the one that made
it fail. A session now remembers the failed range (`split_until`, its last turn id) and
how many turns its next claims there may take (`split_limit`, half of the failed batch):
only a turn that fails alone counts attempts.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("split_limit", sa.Integer(), nullable=True))
    op.add_column("sessions", sa.Column("split_until", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    op.drop_column("sessions", "split_until")
    op.drop_column("sessions", "split_limit")
