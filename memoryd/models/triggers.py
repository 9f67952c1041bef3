"""Row triggers on `memories` that keep a derived table right on every write path
(models/tallies.py, models/key_index.py): each installs its statements per dialect and
drops them by one naming scheme."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import text
from sqlalchemy.engine import Connection


def install_triggers(
    bind: Connection, postgres: Sequence[str], sqlite: Sequence[str], table: str, count_all: str
) -> None:
    """(Re-)create the triggers, and start `table` again from the memories stored now."""
    for statement in postgres if bind.dialect.name == "postgresql" else sqlite:
        bind.execute(text(statement))
    refill(bind, table, count_all)


def refill(bind: Connection, table: str, count_all: str) -> None:
    """Empty `table` and fill it by `count_all` (a statement over the memories)."""
    bind.execute(text(f"DELETE FROM {table}"))
    bind.execute(text(count_all))


def uninstall_triggers(bind: Connection, stem: str, function: str) -> None:
    """Drop `memories_{stem}_…`: on PostgreSQL its two triggers and their function, on
    SQLite its three triggers."""
    if bind.dialect.name == "postgresql":
        bind.execute(text(f"DROP TRIGGER IF EXISTS memories_{stem}_insert_delete ON memories"))
        bind.execute(text(f"DROP TRIGGER IF EXISTS memories_{stem}_update ON memories"))
        bind.execute(text(f"DROP FUNCTION IF EXISTS {function}()"))
    else:
        for name in ("insert", "delete", "update"):
            bind.execute(text(f"DROP TRIGGER IF EXISTS memories_{stem}_{name}"))
