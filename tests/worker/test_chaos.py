"""The chaos suite at reduced size, as CI runs it: every scenario must end with nothing
lost, duplicated, stranded or dead-lettered (bench/chaos.py has the full-size run)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.services import ServiceUnavailable, rabbitmq_bin
from tests.workers import REPO_ROOT


def rabbitmq_installed() -> bool:
    try:
        rabbitmq_bin()
    except ServiceUnavailable:
        return False
    return True


pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_every_turn_is_extracted_exactly_once_through_every_fault() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "chaos.py"), "--quick"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    report = out.stdout.strip().splitlines()
    figures = json.loads(report[-1])
    assert out.returncode == 0, "\n".join(report[-25:]) + out.stderr[-3000:]
    # 17 scenarios, 8 of them on SQLite too; rabbitmq_restart where RabbitMQ is installed.
    assert figures["scenarios"] + figures["skipped"] == 25
    assert figures["skipped"] == (0 if rabbitmq_installed() else 1)
    for key in ("lost", "duplicated", "stranded", "dead_lettered_transient", "failed_scenarios"):
        assert figures[key] == 0, (key, "\n".join(report[-25:]))
