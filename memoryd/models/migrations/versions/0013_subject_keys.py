"""subject keys: memories about the same thing are found by key, not by recency

Replacement and dedup looked only at the 200 most recently updated memories of a scope,
and what the extractor was shown was picked by word overlap with the batch: past 200
memories a new fact could no longer retire the one it contradicts ("moved to Porto"
shares no words with "Lives in Lisbon"). Each memory now carries the normalised key of
its name ("home city"), indexed per scope for active memories, so the memories a fact is
about are one index lookup away at any size. Names that only repeat the content (older
rows, saves without a name) get no key.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-24
"""

import re
import unicodedata
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_KEYED_ACTIVE = "status = 'active' AND name_key <> ''"
_CHUNK = 5_000


def upgrade() -> None:
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("name_key", sa.String(200), server_default="", nullable=False)
        )
    _fill_keys(op.get_bind())
    op.create_index(
        "ix_memories_scope_key",
        "memories",
        ["agent_id", "user_id", "name_key"],
        postgresql_where=sa.text(_KEYED_ACTIVE),
        sqlite_where=sa.text(_KEYED_ACTIVE),
    )


# The key rule as this revision shipped it (memoryd/memories/subjects.py then), kept
# here: a later change to the application's rule must not change what this migration
# does to a database it has not reached yet.
_SPACE = re.compile(r"\s+")
_EDGE = " \t\n.,;:!?'\"“”‘’()[]{}。，；：！？、（）"
_CUT_LENGTH = 40
_MAX_KEY = 200


def _key_for(name: str, content: str) -> str:
    name_s, content_s = name.strip(), content.strip()
    if not name_s:
        return ""
    cut = content_s.startswith(name_s) and (
        len(name_s) == len(content_s) or len(name_s) >= _CUT_LENGTH
    )
    if cut:
        return ""
    key = _SPACE.sub(" ", unicodedata.normalize("NFKC", name).casefold())
    return key.strip(_EDGE)[:_MAX_KEY]


def _fill_keys(bind: sa.Connection) -> None:
    """Keys computed by the rule of this revision, a chunk at a time."""
    select = sa.text(
        "SELECT id, name, content FROM memories WHERE id > :after AND name <> '' "
        "ORDER BY id LIMIT :chunk"
    )
    update = sa.text("UPDATE memories SET name_key = :key WHERE id = :id")
    after = 0
    while rows := bind.execute(select, {"after": after, "chunk": _CHUNK}).all():
        keyed = [{"id": r.id, "key": _key_for(r.name, r.content)} for r in rows]
        keyed = [k for k in keyed if k["key"]]
        if keyed:
            bind.execute(update, keyed)
        after = rows[-1].id


def downgrade() -> None:
    op.drop_index("ix_memories_scope_key", table_name="memories")
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.drop_column("name_key")
