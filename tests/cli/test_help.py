"""`memoryd -h` and `memoryd COMMAND -h`: every command and option says what it is for,
and each option with a default says which."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator

from memoryd.cli.main import build_parser
from memoryd.worker.config import QUEUES
from testkit.workers import REPO_ROOT


def parsers(
    parser: argparse.ArgumentParser, name: str = "memoryd"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every parser of the command line, subcommands' included, with its command."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            listed = {a.dest: a.help for a in action._choices_actions}
            for command, sub in action.choices.items():
                assert listed.get(command), f"{name} {command}: no help in {name} -h"
                yield from parsers(sub, f"{name} {command}")


def shown_default(action: argparse.Action) -> bool:
    default = action.default
    return not (action.required or default is None or default is False or default == "")


def test_every_option_has_help_and_shows_its_default() -> None:
    seen = 0
    for name, parser in parsers(build_parser()):
        assert parser.description, f"{name}: no description"
        text = " ".join(parser.format_help().split())  # unwrapped
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            what = f"{name} {'/'.join(action.option_strings) or action.dest}"
            assert action.help, f"{what}: no help text"
            if shown_default(action):
                seen += 1
                assert f"(default: {action.default})" in text, f"{what}: default not shown"
            else:
                assert "(default: None)" not in text and "(default: )" not in text, what
    assert seen >= 10  # --role, --limit, --port, --type, ...


def test_worker_help_names_the_queues_it_consumes_by_default() -> None:
    (worker,) = [p for name, p in parsers(build_parser()) if name == "memoryd worker"]
    assert f"(default: {','.join(QUEUES)})" in " ".join(worker.format_help().split())


def test_help_as_a_user_sees_it() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "memoryd", "list", "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (out.returncode, out.stderr) == (0, "")
    text = " ".join(out.stdout.split())
    assert "list a scope's memories, newest first" in text
    assert "--limit LIMIT how many to show, at most 500 (default: 50)" in text
    assert "(default: active)" in text and "(default: 0)" in text
