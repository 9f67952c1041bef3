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

from memoryd.models.db import session_scope
from memoryd.settings import Settings


def generic_plan(settings: Settings, statement: str, parameters: dict[str, Any]) -> str:
    """EXPLAIN of `statement` (as psycopg was sent it, with `parameters`) prepared and
    run by its generic plan."""
    casts = dict(re.findall(r"%\((\w+)\)s(::[A-Z\[\]]+)", statement))
    numbered = statement
    for number, name in enumerate(casts, 1):
        numbered = numbered.replace(f"%({name})s", f"${number}")
    with session_scope(settings.storage) as session:
        conn = session.connection()
        driver = conn.connection.driver_connection
        arguments = ", ".join(
            f"{psycopg.sql.Literal(parameters[name]).as_string(driver)}{cast}"
            for name, cast in casts.items()
        )
        conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.exec_driver_sql(f"PREPARE asked AS {numbered}")
        try:  # a prepared statement outlives the transaction: the pool reuses the session
            found = conn.exec_driver_sql(f"EXPLAIN (COSTS OFF) EXECUTE asked({arguments})")
            plan = "\n".join(row[0] for row in found)
        finally:
            conn.exec_driver_sql("DEALLOCATE asked")
        session.rollback()
    return plan


@contextmanager
def statements_sent(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """Each statement `engine` sends meanwhile, with its parameters."""
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
    return next((s, p) for s, p in sent if all(marker in s for marker in markers))
