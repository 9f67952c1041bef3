"""`memoryd worker` and `memoryd beat` read their own options (memoryd/cli/launch.py):
a mistake in one is refused, naming the option, before any worker starts."""

from __future__ import annotations

import subprocess
import sys

import pytest


def memoryd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memoryd", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["worker", "-c", "abc"], "argument -c/--concurrency: not a whole number: 'abc'"),
        (["worker", "--concurrency", "0"], "argument -c/--concurrency: must be from 1 to"),
        (["worker", "-l", "bogus"], "argument -l/--loglevel: invalid choice: 'BOGUS'"),
        (["worker", "-Q", "extraction,extration"], "-Q/--queues: unknown queue 'extration'"),
        (["worker", "--pool", "eventlet"], "argument -P/--pool: invalid choice: 'eventlet'"),
        (["beat", "--max-interval", "-1"], "--max-interval: must be more than 0 seconds"),
        (["beat", "--max-interval", "nan"], "--max-interval: must be more than 0 seconds"),
        (["beat", "--concurrency", "2"], "unrecognized arguments: --concurrency 2"),
    ],
)
def test_a_bad_option_is_refused_naming_it(args: list[str], said: str) -> None:
    out = memoryd(*args)
    last = out.stderr.splitlines()[-1]
    assert out.returncode == 2, out.stderr
    assert last.startswith(f"memoryd {args[0]}: error: ") and said in last, out.stderr


@pytest.mark.parametrize(
    ("command", "defaults"),
    [("worker", ["(default: threads)", "(default: INFO)"]), ("beat", ["(default: INFO)"])],
)
def test_help_lists_each_option_with_its_default(command: str, defaults: list[str]) -> None:
    out = memoryd(command, "--help")
    assert out.returncode == 0 and out.stdout.startswith(f"usage: memoryd {command} ")
    help_text = " ".join(out.stdout.split())  # as wrapped to the terminal's width
    for default in defaults:
        assert default in help_text, out.stdout
