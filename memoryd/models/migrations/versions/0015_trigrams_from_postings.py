"""trigrams from postings: the trigram index of large scopes goes

A scope larger than SCAN_LIMIT took its trigram candidates from pg_trgm's KNN search
(PostgreSQL) or an FTS5 trigram table (SQLite). On real conversation text (about 250
characters a memory) the KNN search rechecked a thousand rows per query: 50 to 150 ms at
5,000 memories, against 2 ms for BM25. Candidates now come from the keyword postings,
by term prefix (recall/trigrams.py), the same statement on both databases; the index
and the table only cost writes.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25
"""

from collections.abc import Sequence

from alembic import op

from memoryd.models import search_index

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    search_index.set_trigram_index(op.get_bind(), present=False)


def downgrade() -> None:
    search_index.set_trigram_index(op.get_bind(), present=True)
