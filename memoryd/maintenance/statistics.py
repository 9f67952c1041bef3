"""Planner statistics of memoryd's busiest tables, fresh on PostgreSQL whatever the
server's autovacuum does.

Recall's plans depend on them: on a freshly loaded store, before any ANALYZE, recall's
p95 was 4-6 times its figure after one (45 ms against 10 ms on the same questions). A
server may run with autovacuum off, and a store right after a bulk import or a new
deployment is in the same state until its autovacuum comes round. Each sweep (every 15
seconds) and each maintenance cycle ANALYZE the busiest tables (TABLES) that changed
as much as autovacuum's default threshold asks (more than 50 rows plus 10% of the
table's rows since the last ANALYZE): the cost follows what changed (a look at the
server's counts when nothing did), and a store that changes little is never analysed
again. An ANALYZE also invalidates the plans connections prepared while the table was
small: the server keeps a prepared statement's generic plan until an ANALYZE or VACUUM
of the table (the hits' read by id stayed a sequential scan of thousands of memories).
SQLite plans without such statistics.
"""

from __future__ import annotations

import logging

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from memoryd.models.db import session_scope
from memoryd.models.dialect import keeps_planner_statistics
from memoryd.settings import StorageSettings

log = logging.getLogger(__name__)

# The tables recall and the pipeline plan over, as they grow.
TABLES = ("memories", "memory_terms", "subject_keys", "turns", "memory_usage", "memory_events")
THRESHOLD_ROWS = 50  # autovacuum_analyze_threshold's default
THRESHOLD_SHARE = 0.1  # autovacuum_analyze_scale_factor's default


def due_tables(session: Session) -> list[str]:
    """memoryd's tables changed enough since their last ANALYZE to need another, of
    those this role may analyse: another role's table would only get the server's
    warning and stay due."""
    rows = session.execute(
        text(
            "SELECT s.relname FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid "
            "WHERE s.relname = ANY(:tables) AND s.schemaname = current_schema() "
            "AND pg_has_role(c.relowner, 'USAGE') "
            "AND s.n_mod_since_analyze > :rows + :share * s.n_live_tup ORDER BY s.relname"
        ),
        {"tables": list(TABLES), "rows": THRESHOLD_ROWS, "share": THRESHOLD_SHARE},
    )
    return [name for (name,) in rows]


def analyze_changed(session: Session) -> list[str]:
    """ANALYZE the tables due (PostgreSQL; nothing on SQLite): the ones analysed. A
    table another ANALYZE or a VACUUM holds (autovacuum's) is skipped rather than waited
    for, and stays due."""
    if not keeps_planner_statistics(session):
        return []
    due = due_tables(session)
    if not due:
        return []
    for table in due:  # names from TABLES only, never from input
        session.execute(text(f"ANALYZE (SKIP_LOCKED) {table}"))
    session.execute(text("SELECT pg_stat_clear_snapshot()"))  # the counts as they are now
    skipped = set(due_tables(session))
    analysed = [table for table in due if table not in skipped]
    if analysed:
        log.info("planner statistics refreshed: %s", ", ".join(analysed))
    return analysed


def analyze_due(settings: StorageSettings) -> int:
    """analyze_changed, each ANALYZE committing alone (no table stays locked while the
    next is analysed): how many tables it analysed. A failure (a lock wait past the
    timeout, say) is logged and analyses none: the sweep's other work stands."""
    try:
        with session_scope(settings, autocommit=True) as session:
            return len(analyze_changed(session))
    except DBAPIError as exc:
        log.warning("refreshing planner statistics failed: %s", type(exc).__name__)
        return 0
