"""`memoryd ... | head`: a reader that stops early ends the command quietly."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

from memoryd.settings import Settings
from testkit.workers import settings_env

pytestmark = pytest.mark.slow  # every test runs `memoryd` as a process of its own


def test_a_reader_that_stops_early_gets_no_broken_pipe_error(settings: Settings) -> None:
    from memoryd.models.db import session_scope
    from tests.factories import make_memory

    # Far more than a pipe holds (64 KiB), so memoryd is still writing when head exits.
    with session_scope(settings.storage) as session:
        for i in range(300):
            make_memory(session, settings, f"Fact {i}: " + "remembered detail " * 25)
    memoryd = shlex.join([sys.executable, "-m", "memoryd"])
    for command in ("list --agent bot --user ann --limit 500", "export"):
        out = subprocess.run(
            ["bash", "-c", f"{memoryd} {command} | head -1; exit ${{PIPESTATUS[0]}}"],
            env=settings_env(settings),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.stderr == "", command
        assert out.stdout.count("\n") == 1, command
        assert out.returncode == 141, command  # what a shell reports for `cat` cut short
