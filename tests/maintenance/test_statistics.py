"""Fresh planner statistics on PostgreSQL without autovacuum: the sweep and the cycle
ANALYZE the tables that changed enough, and leave alone those that did not."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from memoryd.maintenance.cycle import run_cycle
from memoryd.maintenance.statistics import analyze_changed, analyze_due
from memoryd.models.db import get_engine, session_scope
from memoryd.settings import Settings
from memoryd.tasks import maintenance
from testkit.databases import scratch_database


def last_analyzed(settings: Settings) -> dict[str, object]:
    with get_engine(settings.storage).connect() as conn:
        rows = conn.execute(
            text(
                "SELECT relname, coalesce(last_analyze, last_autoanalyze) FROM pg_stat_user_tables "
                "WHERE relname IN ('memories', 'memory_terms', 'turns')"
            )
        )
        return dict(rows.all())


def bulk_load(settings: Settings) -> None:
    """3,000 memories written around memoryd, as an import or a restore does."""
    with get_engine(settings.storage).begin() as conn:
        conn.execute(text("ALTER TABLE memories SET (autovacuum_enabled = false)"))
        conn.execute(
            text(
                "INSERT INTO memories (agent_id, user_id, category, tier, status, name, content, "
                "tags, confidence, weight, weight_at, evidence_count, access_count, "
                "content_hash, created_at, updated_at, search_text, source_turn_ids) "
                "SELECT 'bot', 'u' || (g % 50), 'user', 'long', 'active', '', 'Fact ' || g, "
                "'[]', 0.9, 1.0, now(), 1, 0, md5(g::text), now(), now(), 'fact ' || g, '[]' "
                "FROM generate_series(1, 3000) AS g"
            )
        )
        conn.execute(text("SELECT pg_stat_force_next_flush()"))  # counted at commit


def test_a_bulk_load_gets_statistics_from_the_next_cycle(
    backend: str, settings: Settings, pg_server: str
) -> None:
    if backend != "postgres":
        pytest.skip("SQLite plans without table statistics")
    # A database of its own: the worker's shared one is emptied before each test by a
    # connection whose counts of deleted turns reach the server up to seconds later,
    # which made `turns` due in the middle of this test.
    with scratch_database(pg_server, "memoryd_test_statistics") as url:
        fresh = settings.updated(database_url=url)
        analyze_due(fresh.storage)  # what the migrations wrote
        bulk_load(fresh)
        before = last_analyzed(fresh)
        counts = run_cycle(fresh)
        assert counts.tables_analyzed >= 2  # memories and their postings
        after = last_analyzed(fresh)
        assert after["memories"] is not None and after["memories"] != before["memories"]
        assert after["turns"] == before["turns"]  # unchanged, left alone
        run_cycle(fresh)
        assert last_analyzed(fresh)["memories"] == after["memories"]  # nothing changed since


def test_a_bulk_load_gets_statistics_from_the_next_sweep(
    backend: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within seconds (the sweep's interval), not at the hourly cycle."""
    if backend != "postgres":
        pytest.skip("SQLite plans without table statistics")
    monkeypatch.setattr(maintenance, "get_settings", lambda: settings)
    bulk_load(settings)
    before = last_analyzed(settings)["memories"]
    assert maintenance.sweep.apply().get()["tables_analyzed"] >= 2
    after = last_analyzed(settings)["memories"]
    assert after not in (None, before)
    maintenance.sweep.apply().get()
    assert last_analyzed(settings)["memories"] == after  # nothing changed since


def test_a_table_autovacuum_holds_is_skipped_not_waited_for(
    backend: str, settings: Settings
) -> None:
    """Its lock taken elsewhere (as autovacuum takes it), the other tables due are
    analysed at once and that one is neither analysed nor counted: it stays due."""
    if backend != "postgres":
        pytest.skip("SQLite plans without table statistics")
    bulk_load(settings)
    before = last_analyzed(settings)
    with get_engine(settings.storage).connect() as holder:
        holder.execute(text("LOCK TABLE memories IN SHARE UPDATE EXCLUSIVE MODE"))
        analysed = analyzed_now(settings)  # waiting would fail at the lock timeout
        during = last_analyzed(settings)
        holder.rollback()
    assert "memory_terms" in analysed and "memories" not in analysed
    assert during["memories"] == before["memories"]
    assert "memories" in analyzed_now(settings)  # once released


def analyzed_now(settings: Settings) -> list[str]:
    with session_scope(settings.storage, autocommit=True) as session:
        return analyze_changed(session)
