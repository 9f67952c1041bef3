"""sessions keep room on each page for their rows' next versions (PostgreSQL)

Every enqueue bumps its session's counter, and every claim and release rewrites its
lease: the sessions table is updated far more often than it grows. Its indexed columns
stay as they are in those updates, so each could be a HOT update (no index entry
written), but only when the row's page has room for the new version. With every page
filled, 22% of a bulk ingest's bumps were HOT; with 30% of each new page left free
(fillfactor 70), 94%, and bulk calls spread over 1,000 sessions stored 40,300 to
42,300 turns a second against 34,900 to 39,800 (a scratch script sending
bench/ingest.py's spread calls, 60 calls in each of two runs a setting;
docs/benchmarks.md). Existing pages keep what they hold; pages written from now on
(and the whole table, after a VACUUM FULL) leave the room.

Revision ID: 0032
Revises: 0031
Create Date: 2026-11-30
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0032"
down_revision: str | None = "0031"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE sessions SET (fillfactor = 70)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE sessions RESET (fillfactor)")
