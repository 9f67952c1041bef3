"""The chaos suite at reduced size, as CI runs it: every scenario must end with nothing
lost, duplicated, stranded or dead-lettered (bench/chaos.py has the full-size run)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import pytest

from testkit import hosts
from testkit.services import PgBouncer, ServiceUnavailable, rabbitmq_bin
from testkit.workers import REPO_ROOT


def installed(check: Callable[[], object]) -> bool:
    try:
        check()
    except ServiceUnavailable:
        return False
    return True


def skipped_here() -> int:
    """Scenario runs this machine cannot have: rabbitmq_restart without rabbitmq-server,
    kill behind PgBouncer without pgbouncer, partition and clock_ahead without hosts."""
    bouncer = installed(lambda: PgBouncer(("127.0.0.1", 5432)).stop())
    return (not installed(rabbitmq_bin)) + (not bouncer) + 2 * (hosts.unavailable() is not None)


pytestmark = [pytest.mark.slow, pytest.mark.long(seconds=240), pytest.mark.timeout(1800)]


def test_every_turn_is_extracted_exactly_once_through_every_fault() -> None:
    out = subprocess.run(
        # Three runs at a time, each job with servers of its own (bench/chaos_jobs.py).
        [sys.executable, str(REPO_ROOT / "bench" / "chaos.py"), "--quick", "--jobs", "3"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        # 240 s on a quiet 2-core machine, 770 s in a CI run where it was about 3x slower.
        timeout=1740,
    )
    report = out.stdout.strip().splitlines()
    figures = json.loads(report[-1])
    failed = [line for line in report if " FAILED " in line]  # each with why, in its notes
    assert out.returncode == 0, "\n".join([*failed, *report[-25:]]) + out.stderr[-3000:]
    # 19 scenarios, 8 of them on SQLite too and kill behind PgBouncer as well.
    assert figures["scenarios"] + figures["skipped"] == 28
    assert figures["skipped"] == skipped_here(), out.stderr[-3000:]
    for key in ("lost", "duplicated", "stranded", "dead_lettered_transient", "failed_scenarios"):
        assert figures[key] == 0, (key, "\n".join(report[-25:]))
