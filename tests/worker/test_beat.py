"""Celery beat really schedules the maintenance tasks on a real worker."""

from __future__ import annotations

from pathlib import Path

import pytest
from freezegun import freeze_time
from sqlalchemy import select

from memoryd.client import MemoryClient
from memoryd.models.db import session_scope
from memoryd.models.tables import Memory, MemoryStatus
from testkit.workers import start_beat, start_worker, turns_left, wait_until
from tests.conftest import make_settings
from tests.factories import make_memory

pytestmark = pytest.mark.slow


def test_beat_runs_sweep_and_maintenance(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    settings = make_settings(
        backend,
        tmp_path,
        request,
        sweep_interval_seconds=1,
        maintenance_interval_seconds=1,
        flush_idle_seconds=1,
    )
    with session_scope(settings.storage) as session, freeze_time("2020-01-01"):
        old_id = make_memory(session, settings, "Used to like jazz").id  # long decayed since
    # A turn whose trigger never reaches a worker: only the sweep can find it.
    MemoryClient(settings, dispatch=False).enqueue_turn(
        agent_id="bot", user_id="ann", session_id="s", role="user", content="Call me Annie."
    )

    worker = start_worker(settings, tmp_path)
    beat = start_beat(settings, tmp_path)
    try:

        def archived() -> bool:
            with session_scope(settings.storage) as session:
                return session.get(Memory, old_id).status == MemoryStatus.ARCHIVED  # type: ignore[union-attr]

        wait_until(archived, 60, what="maintenance cycle from beat", procs=(worker, beat))
        wait_until(
            lambda: turns_left(settings) == 0, 60, what="sweep from beat", procs=(worker, beat)
        )
    finally:
        beat.stop()
        worker.stop()
    with session_scope(settings.storage) as session:
        contents = session.scalars(
            select(Memory.content).where(Memory.status == MemoryStatus.ACTIVE)
        ).all()
    assert contents == ["Wants to be called Annie"]
    assert "memoryd.maintenance.cycle" in worker.log()
