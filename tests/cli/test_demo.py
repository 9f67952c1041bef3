"""`make demo` as a newcomer runs it: `memoryd demo` in a fresh folder, no LLM, no
servers. It must show what was remembered and how a chat backend reads it back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.workers import REPO_ROOT


@pytest.mark.slow
def test_the_demo_remembers_and_reads_back_on_the_embedded_default(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORYD_", "OPENAI_"))}
    env["PYTHONPATH"] = str(REPO_ROOT)
    out = subprocess.run(
        [sys.executable, "-m", "memoryd", "demo"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr
    shown = out.stdout
    assert "no LLM configured" in shown and "offline" in shown
    assert "Lives in Lisbon" in shown and "(replaced by #" in shown  # Berlin retired
    assert '{"secret": 1}' in shown  # the password was not remembered
    assert "hunter2" not in shown
    # The read side: Ali's home city first, the Chinese user's tea, and the blocks.
    alice = shown.split("recall('Where does Ali live now?') for alice\n", 1)[1]
    assert alice.splitlines()[0].endswith("Lives in Lisbon")
    assert "喜欢喝龙井茶" in shown.split("for bo\n", 1)[1].splitlines()[0]
    assert shown.count("<memory-context>") == 2
    assert (tmp_path / ".memoryd-demo").is_dir()  # the demo's own folder, nothing else
