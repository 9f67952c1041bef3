"""memories' search terms re-derived by today's term rules

Two rule changes reached stores without a reindex: common Chinese characters stopped
being terms of their own (`上`, `的`), and a memory named by a subject key's slot also
carries that slot's words ("diet": eat, food, 吃). Queries are split by today's rules,
so a memory stored before kept the old terms: stop characters that no query holds
lengthened it for BM25, and its slot's words were missing. Only memories whose terms
differ are rewritten; the triggers rebuild their postings.

Revision ID: 0030
Revises: 0029
Create Date: 2026-11-29
"""

from collections.abc import Sequence

from alembic import op

from memoryd.models import search_index

revision: str = "0030"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    search_index.reindex_terms(op.get_bind())


def downgrade() -> None:
    pass  # the terms of today's rules serve the older schema as well
