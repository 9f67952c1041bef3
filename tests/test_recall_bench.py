"""bench/recall.py end to end at a small size, on the suite's PostgreSQL server and on
SQLite: it loads its scopes (heavy ones past SCAN_LIMIT, so through the postings), drops
the scope indexes for its baseline, and ends with a JSON line of both databases'
figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.long(seconds=60)
@pytest.mark.timeout(1800)
def test_recall_bench_runs_at_a_small_size(pg_server: str) -> None:
    run = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "recall.py"),
            *("--rows", "2000", "--queries", "20", "--heavy-users", "2", "--heavy-rows", "2400"),
        ],
        cwd=REPO,
        env={**os.environ, "MEMORYD_BENCH_PG": pg_server},
        capture_output=True,
        text=True,
        # 60 s alone on a 2-core machine, 500 s among the suite's other tests on a slow
        # day: the bound is for a run that hangs, not a slow one.
        timeout=1740,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    for database in ("", "sqlite_"):
        for key in ("recall_p95_ms", "context_p95_ms", "heavy_recall_p95_ms", "baseline_p95_ms"):
            assert figures[database + key] > 0, database + key
        # Most sample queries name a subject of the heavy users' memories (25 of 30).
        assert figures[database + "heavy_matched_share"] > 0.5, database
