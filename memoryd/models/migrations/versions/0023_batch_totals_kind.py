"""batch totals per kind: extraction and compression runs counted apart

Both record their runs as batches; the totals and the Prometheus counters now say
which is which. Totals kept so far were all counted as extraction.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-26
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("batch_totals", recreate="always") as batch:
        batch.add_column(
            sa.Column("kind", sa.String(length=12), server_default="extract", nullable=False)
        )
        batch.drop_constraint("pk_batch_totals", type_="primary")
        batch.create_primary_key("pk_batch_totals", ["status", "kind"])
    with op.batch_alter_table("batch_totals") as batch:
        batch.alter_column("kind", server_default=None)


def downgrade() -> None:
    # The kinds of one status are added together into one row again.
    bind = op.get_bind()
    totals = sa.table(
        "batch_totals",
        *(sa.column(name) for name in ("status", "kind", *_SUMMED, "last_finished_at")),
        sa.column("rejections", sa.JSON),
    )
    merged: dict[str, dict[str, Any]] = {}
    for row in bind.execute(sa.select(totals)).mappings():
        into = merged.setdefault(row["status"], {"batches": 0, "rejections": {}})
        for name in _SUMMED:
            into[name] = into.get(name, 0) + row[name]
        for reason, facts in (row["rejections"] or {}).items():
            into["rejections"][reason] = into["rejections"].get(reason, 0) + facts
        last = row["last_finished_at"]
        if last is not None and (
            into.get("last_finished_at") is None or last > into["last_finished_at"]
        ):
            into["last_finished_at"] = last
    bind.execute(sa.delete(totals))
    for status, values in merged.items():
        bind.execute(sa.insert(totals).values(status=status, kind="extract", **values))
    with op.batch_alter_table("batch_totals", recreate="always") as batch:
        batch.drop_constraint("pk_batch_totals", type_="primary")
        batch.create_primary_key("pk_batch_totals", ["status"])
        batch.drop_column("kind")


_SUMMED = (
    "batches",
    "llm_calls",
    "tokens_in",
    "tokens_out",
    "facts_proposed",
    "facts_accepted",
)
