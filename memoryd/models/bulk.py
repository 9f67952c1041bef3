"""Many rows written in one statement, the same on both databases: rows inserted or
updated by key from one list of values per column. SQLite runs in process, so a plain
executemany is cheapest there; PostgreSQL gets the rows as one JSON array, so the
statement does not vary with the number of rows and costs one round trip."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from sqlalchemy import Table, Update, any_, bindparam, cast, column, func, insert, select, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Session
from sqlalchemy.sql.expression import Executable

from memoryd.models.base import require_aware
from memoryd.models.db import is_sqlite


def write_rows(
    session: Session, table: Table, columns: dict[str, list[Any]], *, key: str | None
) -> None:
    """Insert rows (key None) or update them by `key`; `columns` holds one list per
    column, a value per row. SQLite runs in process: plain executemany, parameters typed
    from the table. PostgreSQL: one statement over a JSON array of the rows (json_table)."""
    if is_sqlite(session):
        names = [f"b_{c}" for c in columns]
        params: Any = [
            dict(zip(names, values, strict=True)) for values in zip(*columns.values(), strict=True)
        ]
        statement = _sqlite_statement(table, tuple(columns), key)
    else:
        params = {"rows": json_rows(columns)}
        statement = _pg_statement(table, tuple(columns), key)
    session.connection().execute(statement, params)


def json_rows(columns: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The rows as JSON objects; the record's column types turn values back on the server."""
    return [
        dict(zip(columns, map(_json_value, values), strict=True))
        for values in zip(*columns.values(), strict=True)
    ]


def _json_value(value: Any) -> Any:
    return require_aware(value).isoformat() if isinstance(value, datetime) else value


# Statements are built once per shape: every recall writes with the same ones, and
# building one took about 0.4 ms each time.
@functools.cache
def _sqlite_statement(table: Table, columns: tuple[str, ...], key: str | None) -> Executable:
    source = {c: bindparam(f"b_{c}", type_=table.c[c].type) for c in columns}
    if key is None:
        return insert(table).values(source)
    keyed = source.pop(key)
    return update(table).where(table.c[key] == keyed).values(source)


def json_table(table: Table, columns: tuple[str, ...], param: str) -> Any:
    """The JSON array of rows in parameter `param` as a table, typed by `table`'s columns:
    a statement over it does not vary with the number of rows, so the server plans it
    once, and a recall's twenty rows cost about what one does. (Arrays did the same, but
    the driver escapes every element of an array in Python: about 1 ms a recall.)"""
    return (
        func.jsonb_to_recordset(bindparam(param, type_=JSONB))
        .table_valued(*(column(c, table.c[c].type) for c in columns), name=f"{param}_given")
        .render_derived(with_types=True)
    )


def pg_update(table: Table, columns: tuple[str, ...], key: str, param: str) -> Update:
    """Update the rows of the JSON array in `param` by `key`. The keys are also matched
    as an array (`key = ANY(ARRAY(...))`), which the planner reads through the key's
    index: joined to the rows alone, which it guesses at a hundred, it scanned the whole
    table of a store of a few thousand memories on every recall (1.4 ms at 3,600)."""
    given = json_table(table, columns, param)
    element = func.jsonb_array_elements(bindparam(param, type_=JSONB)).column_valued("element")
    keys = select(cast(element.op("->>")(key), table.c[key].type)).scalar_subquery()
    return (
        update(table)
        .where(table.c[key] == any_(func.array(keys)), table.c[key] == given.c[key])
        .values({c: given.c[c] for c in columns if c != key})
    )


@functools.cache
def _pg_statement(table: Table, columns: tuple[str, ...], key: str | None) -> Executable:
    if key is not None:
        return pg_update(table, columns, key, "rows")
    given = json_table(table, columns, "rows")
    return insert(table).from_select(list(columns), select(*given.c))
