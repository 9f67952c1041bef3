"""Planner statistics of memoryd's busiest tables, fresh on PostgreSQL whatever the
server's autovacuum does.

Recall's plans depend on them: on a freshly loaded store, before any ANALYZE, recall's
p95 was 4-6 times its figure after one (45 ms against 10 ms on the same questions). A
server may run with autovacuum off, and a store right after a bulk import or a new
deployment is in the same state until its autovacuum comes round. Each sweep (every 15
seconds) and each maintenance cycle ANALYZE the tables that changed as much as
autovacuum's default threshold asks (50 rows and 10% of the table since the last
ANALYZE): the cost follows what changed (a look at the server's counts when nothing
did), and a store that changes little is never analysed again. An
ANALYZE also invalidates the plans connections prepared while the table was small: the
server keeps a prepared statement's generic plan until an ANALYZE or VACUUM of the
table (the hits' read by id stayed a sequential scan of thousands of memories). SQLite plans
without such statistics.
"""

from __future__ import annotations

import logging

from sqlalchemy import text
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
    """memoryd's tables changed enough since their last ANALYZE to need another."""
    rows = session.execute(
        text(
            "SELECT relname FROM pg_stat_user_tables "
            "WHERE relname = ANY(:tables) AND schemaname = current_schema() "
            "AND n_mod_since_analyze > :rows + :share * n_live_tup ORDER BY relname"
        ),
        {"tables": list(TABLES), "rows": THRESHOLD_ROWS, "share": THRESHOLD_SHARE},
    )
    return [name for (name,) in rows]


def analyze_changed(session: Session) -> list[str]:
    """ANALYZE the tables due (PostgreSQL; nothing on SQLite), and name them. A
    table another ANALYZE or a VACUUM holds (autovacuum's) is skipped, not waited for:
    it stays due, and the sweep would otherwise wait up to the lock timeout each time."""
    if not keeps_planner_statistics(session):
        return []
    tables = due_tables(session)
    for table in tables:  # names from TABLES only, never from input
        session.execute(text(f"ANALYZE (SKIP_LOCKED) {table}"))
    if tables:
        log.info("planner statistics refreshed: %s", ", ".join(tables))
    return tables


def analyze_due(settings: StorageSettings) -> int:
    """analyze_changed in a transaction of its own: how many tables it analysed."""
    with session_scope(settings) as session:
        return len(analyze_changed(session))
