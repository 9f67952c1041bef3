"""recall writes in place: no index holds a column that a retrieval changes

Every recall reinforces the memories it returns. access_count, expires_at and
archive_due_at were keys of the maintenance indexes, so each of those updates wrote a
new entry into every index of the table (the trigram GiST among them) and churned it.
Now:
- promotion finds its rows through `promotable_at`, set once, by the retrieval that
  reaches promote_access_count; access_count leaves the indexes;
- archive_due_at becomes a lower bound that recall no longer moves (the sweep re-derives
  it from the weight before archiving);
- the TTL restarts in whole hours, so the recalls of one hour leave expires_at as it is;
- PostgreSQL keeps 15% of each new page free (fillfactor 85), room for the new version
  of a row beside the old one (a HOT update).
The scope's embedded memories get an index of their own, so the embedding cache checks
its stamp without reading the rows.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SHORT_ACTIVE = "tier = 'short' AND status = 'active'"
_EMBEDDED = "status = 'active' AND vector IS NOT NULL"


def _partial(where: str) -> dict[str, sa.TextClause]:
    return {"postgresql_where": sa.text(where), "sqlite_where": sa.text(where)}


def upgrade() -> None:
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.add_column(sa.Column("promotable_at", sa.DateTime(timezone=True), nullable=True))
    # Every retrieved short-tier memory is a candidate: the sweep still checks
    # access_count against the setting, whatever threshold it has.
    op.execute(
        "UPDATE memories SET promotable_at = COALESCE(last_accessed_at, updated_at) "
        f"WHERE {_SHORT_ACTIVE} AND access_count > 0"
    )
    op.drop_index("ix_memories_promotion_due", table_name="memories")
    op.create_index(
        "ix_memories_promotion_due",
        "memories",
        ["promotable_at"],
        **_partial(f"{_SHORT_ACTIVE} AND promotable_at IS NOT NULL"),
    )
    op.create_index(
        "ix_memories_scope_vectors",
        "memories",
        ["agent_id", "user_id", "id"],
        **_partial(_EMBEDDED),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE memories SET (fillfactor = 85)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE memories RESET (fillfactor)")
    op.drop_index("ix_memories_scope_vectors", table_name="memories")
    op.drop_index("ix_memories_promotion_due", table_name="memories")
    op.create_index(
        "ix_memories_promotion_due", "memories", ["access_count"], **_partial(_SHORT_ACTIVE)
    )
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.drop_column("promotable_at")
