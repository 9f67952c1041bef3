"""PostgreSQL plans as a long-running service meets them: psycopg prepares a statement
from its fifth run, and the server then weighs a generic plan, made without the values
of the parameters. A partial index is open to that plan only if its condition is
written in the statement's text."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg.sql
from sqlalchemy import Engine, event

from memoryd.models.db import get_engine
from memoryd.settings import Settings

PLACEHOLDER = re.compile(r"%\((\w+)\)s")


def generic_plan(
    settings: Settings, statement: str, parameters: dict[str, Any], options: str = "COSTS OFF"
) -> str:
    """EXPLAIN (`options`) of `statement` (as psycopg was sent it, with `parameters`)
    prepared and run by its generic plan; with ANALYZE it runs, so a read only."""
    names = list(dict.fromkeys(PLACEHOLDER.findall(statement)))
    numbered = PLACEHOLDER.sub(lambda m: f"${names.index(m.group(1)) + 1}", statement)
    with get_engine(settings.storage).connect() as conn:
        driver = conn.connection.driver_connection
        values = [psycopg.sql.Literal(parameters[name]).as_string(driver) for name in names]
        arguments = ", ".join(values).replace("%", "%%")  # psycopg reads the text's %
        conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.exec_driver_sql(f"PREPARE asked AS {numbered}")
        try:
            found = conn.exec_driver_sql(f"EXPLAIN ({options}) EXECUTE asked({arguments})")
            plan = "\n".join(row[0] for row in found)
        finally:  # a prepared statement outlives its transaction, and the pool the session
            conn.rollback()  # which may have dropped it: psycopg deallocates all on rollback
            held = "SELECT count(*) FROM pg_prepared_statements WHERE name = 'asked'"
            if conn.exec_driver_sql(held).scalar():
                conn.exec_driver_sql("DEALLOCATE asked")
            conn.commit()
    return plan


@contextmanager
def statements_sent(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """Each statement `engine` sends meanwhile through SQLAlchemy, with its parameters."""
    sent: list[tuple[str, Any]] = []

    def keep(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        sent.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", keep)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", keep)


def sent_with(sent: list[tuple[str, Any]], *markers: str) -> tuple[str, Any]:
    """The first of `sent` whose text holds every marker."""
    for statement, parameters in sent:
        if all(marker in statement for marker in markers):
            return statement, parameters
    raise AssertionError(f"no statement holds {markers}: {[s[:80] for s, _ in sent]}")


def indexes_read(plan: str) -> set[str]:
    """The indexes `plan` reads, and "seq scan of <table>" for each table it reads whole."""
    read = set(re.findall(r"(?:Index Scan|Index Only Scan|Bitmap Index Scan)(?: Backward)?"
                          r" (?:using|on) (\w+)", plan))  # fmt: skip
    return read | {f"seq scan of {t}" for t in re.findall(r"Seq Scan on (\w+)", plan)}
