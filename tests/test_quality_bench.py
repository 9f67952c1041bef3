"""bench/quality.py end to end on a few questions: loads the shipped data, runs memoryd on
SQLite and the BM25 baseline, and ends with a JSON line of figures in [0, 1]."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.long(seconds=30)
@pytest.mark.timeout(900)
def test_quality_bench_runs_on_a_few_questions() -> None:
    run = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "quality.py"),
            "--databases",
            "sqlite",
            "--no-local",
            "--limit",
            "10",
            "--realmem-users",
            "1",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    figures = json.loads(lines[-1])
    for dataset in ("realmem", "madial_zh", "madial_en"):
        assert figures[f"{dataset}_questions"] == 10
        for key in (f"{dataset}_hit5", f"{dataset}_hit5_sqlite", f"{dataset}_hit5_bm25"):
            assert 0 <= figures[key] <= 1, key
        # A loader that lost the facts or the gold sources leaves BM25 with nothing.
        assert figures[f"{dataset}_hit5_bm25"] > 0, dataset
    # Skipped rows are null, not missing.
    assert figures["realmem_hit5_postgres"] is None
    assert figures["realmem_hit5_local"] is None
    assert figures["madial_en_hit5_anchor_openai"] is not None
