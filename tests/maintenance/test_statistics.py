"""Fresh planner statistics on PostgreSQL without autovacuum: the sweep and the cycle
ANALYZE the tables that changed enough, and leave alone those that did not."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from memoryd.maintenance.cycle import run_cycle
from memoryd.models.db import get_engine
from memoryd.settings import Settings
from memoryd.tasks import maintenance


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


def test_a_bulk_load_gets_statistics_from_the_next_cycle(backend: str, settings: Settings) -> None:
    if backend != "postgres":
        pytest.skip("SQLite plans without table statistics")
    bulk_load(settings)
    before = last_analyzed(settings)["memories"]
    counts = run_cycle(settings)
    assert counts.tables_analyzed >= 2  # memories and their postings
    after = last_analyzed(settings)
    assert after["memories"] is not None and after["memories"] != before
    assert after["turns"] == last_analyzed(settings)["turns"]  # unchanged, left alone
    assert run_cycle(settings).tables_analyzed == 0  # nothing changed since


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
    assert last_analyzed(settings)["memories"] not in (None, before)
    assert maintenance.sweep.apply().get()["tables_analyzed"] == 0
