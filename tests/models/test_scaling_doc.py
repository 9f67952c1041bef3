"""docs/scaling.md relies on facts of the schema; these tests hold the schema, as the
migrations build it on both databases, and the document to each other.

Sharding by scope needs every unique key of a table with scope columns to lead with
them, so that no key spans two scopes; the keys that do not (surrogate ids) are named
in the document, each with what sharding does to it. The growth table names every
table, and every table without scope columns says where it goes in a sharded cluster,
so a new table cannot be left out of either."""

from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy import Connection, inspect, text

from memoryd.models.db import get_engine
from memoryd.settings import Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "scaling.md"
SCOPE = ("agent_id", "user_id")
GROWTH = "## Growth per user-day"
EXCEPTIONS = "### Keys that do not lead with the scope"
WHOLE = "### Where the other tables go"

Key = tuple[str, ...]


def doc_table(heading: str) -> list[list[str]]:
    """The body rows (cells stripped) of the first Markdown table under `heading`."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = lines.index(heading)
    rows: list[list[str]] = []
    for line in lines[start + 1 :]:
        if line.startswith("#"):
            break
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break  # the table ended
    assert len(rows) > 2, f"no table under {heading!r} in {DOC}"
    return rows[2:]  # past the header and its rule


def named(cell: str) -> str:
    """The name a cell gives in backticks: `memories` -> memories."""
    found = re.fullmatch(r"`([^`]+)`.*", cell)
    assert found, f"expected a `name` first in {cell!r}"
    return found.group(1)


def tables(conn: Connection) -> set[str]:
    names = set(inspect(conn).get_table_names())
    return {n for n in names if n != "alembic_version" and not n.startswith("sqlite_")}


def is_scoped(conn: Connection, table: str) -> bool:
    return set(SCOPE) <= {c["name"] for c in inspect(conn).get_columns(table)}


def unique_keys(conn: Connection, table: str) -> set[Key]:
    """The table's primary key, unique constraints and unique indexes, as their columns
    (an expression as its text)."""
    inspector = inspect(conn)
    keys = {tuple(inspector.get_pk_constraint(table)["constrained_columns"])}
    keys |= {tuple(u["column_names"]) for u in inspector.get_unique_constraints(table)}
    for index in inspector.get_indexes(table):
        if index["unique"]:  # `expressions`, when present, names the plain columns too
            keys.add(tuple(map(str, index.get("expressions") or index["column_names"])))
    return keys


def unscoped_keys(conn: Connection) -> set[tuple[str, Key]]:
    """(table, key) for every unique key of a scoped table that does not lead with the
    scope's columns."""
    return {
        (table, key)
        for table in tables(conn)
        if is_scoped(conn, table)
        for key in unique_keys(conn, table)
        if key[: len(SCOPE)] != SCOPE
    }


def documented_exceptions() -> set[tuple[str, Key]]:
    return {(named(row[0]), tuple(named(row[1]).split(", "))) for row in doc_table(EXCEPTIONS)}


def test_the_growth_table_names_every_table(settings: Settings) -> None:
    with get_engine(settings.storage).connect() as conn:
        assert {named(row[0]) for row in doc_table(GROWTH)} == tables(conn)


def test_every_unique_key_of_a_scoped_table_leads_with_the_scope(settings: Settings) -> None:
    """Or is one the document names, with what sharding does to it; and every one it
    names is still there."""
    with get_engine(settings.storage).connect() as conn:
        assert unscoped_keys(conn) == documented_exceptions()


def test_every_table_without_the_scope_is_placed(settings: Settings) -> None:
    """A table without scope columns cannot be sharded by scope: the document says
    where each one goes instead."""
    whole = {named(row[0]) for row in doc_table(WHOLE)}
    with get_engine(settings.storage).connect() as conn:
        every = tables(conn)
        assert {t for t in every if not is_scoped(conn, t)} <= whole <= every


def test_a_unique_index_that_does_not_lead_with_the_scope_is_caught(settings: Settings) -> None:
    """The check above sees a new one, as a migration would add it (rolled back here)."""
    with get_engine(settings.storage).connect() as conn:
        conn.execute(text("CREATE UNIQUE INDEX ix_turns_key_first ON turns (turn_key, user_id)"))
        assert ("turns", ("turn_key", "user_id")) in unscoped_keys(conn)
        conn.rollback()
        assert ("turns", ("turn_key", "user_id")) not in unscoped_keys(conn)
