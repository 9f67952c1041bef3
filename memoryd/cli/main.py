"""The `memoryd` command line. Arguments are validated with pydantic before anything runs."""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
from collections.abc import Sequence

from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError

from memoryd.cli import erase, launch, local_llm, memories, pipeline, profile
from memoryd.cli import mcp as mcp_command
from memoryd.cli.common import InputError
from memoryd.cli.parsing import Parser
from memoryd.cli.serve import AddCommand, Command
from memoryd.cli.serve import add_commands as add_server_commands
from memoryd.errors import InvalidSettings, MemorydError, field_errors
from memoryd.models.db import describe_db_error
from memoryd.settings import Settings, get_settings, masked_url

# ------------------------------------------------------------------------------- commands


def cmd_migrate(settings: Settings, _ns: argparse.Namespace) -> int:
    from memoryd.models.migrate import upgrade

    upgrade(settings, wait_seconds=settings.worker.startup_wait_seconds)
    print(f"migrated {masked_url(settings.storage.resolved_database_url)} to head")
    return 0


def cmd_demo(settings: Settings, ns: argparse.Namespace) -> int:
    from memoryd.cli.demo import run_demo

    if not ns.local_llm:
        return run_demo(settings)
    from memoryd.llm.local_model import resolve_model
    from memoryd.llm.local_server import ServeOptions, free_port, start

    # The model served in this process while the demo runs (the server stops with its
    # object); the demo's worker finds it through the environment it inherits.
    path, name = resolve_model(ns.local_llm)
    options = ServeOptions(path, name, port=free_port())
    server = start(options)
    os.environ.update(options.env())
    get_settings.cache_clear()
    try:
        return run_demo(get_settings())
    finally:
        del server


# ----------------------------------------------------------------------------------- parser


DESCRIPTION = (
    "Long-term memory for chat agents: turns in, memories out. Settings are MEMORYD_*"
    " environment variables (docs/configuration.md); `memoryd COMMAND -h` tells more."
)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="memoryd", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, fn: Command, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(fn=fn)
        return p

    add("migrate", cmd_migrate, "create or upgrade the database schema")
    profile.add_parser(sub)
    erase.add_parser(sub)
    launch.add_commands(sub)
    _add_demo_command(add)
    pipeline.add_commands(add)
    memories.add_commands(add)
    add_server_commands(add)
    mcp_command.add_command(add)
    local_llm.add_command(add)
    return parser


def _add_demo_command(add: AddCommand) -> None:
    p = add("demo", cmd_demo, "run the pipeline end to end on the embedded default")
    p.add_argument(
        "--local-llm",
        nargs="?",
        const="qwen2.5-coder-1.5b",
        metavar="MODEL",
        help="extract with a local model served here (memoryd local-llm fetch first)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The `memoryd` command. A reader that stops early (`memoryd list ... | head`) ends it
    quietly with 141, the status a shell reports for cat or grep stopped by SIGPIPE: the
    output was cut short, which `set -o pipefail` scripts see as they do for those."""
    try:
        try:
            return _run(argv)
        finally:
            sys.stdout.flush()  # a closed pipe shows here at the latest, not at exit
    except BrokenPipeError:
        # What is still buffered goes nowhere, rather than fail again as the process exits.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _run(argv: Sequence[str] | None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if launch.launches(args):
        return launch.main(args)
    parser = build_parser()
    ns = parser.parse_args(args)
    # Notices (an unknown MEMORYD_* variable, a refused embedding) read like the CLI's own.
    logging.basicConfig(format="memoryd: %(message)s")
    try:
        settings = get_settings()
    except InvalidSettings as exc:
        for line in exc.lines:
            print(f"memoryd: invalid setting: {line}", file=sys.stderr)
        return 2
    fn: Command = ns.fn
    try:
        return fn(settings, ns)
    except BrokenPipeError:
        raise  # an OSError, but the reader's doing: main ends quietly
    except InputError as exc:
        print(f"memoryd: {exc}", file=sys.stderr)
        return 2
    except ValidationError as exc:
        for field, message in field_errors(exc):
            print(f"memoryd: {field}: {message}", file=sys.stderr)
        return 2
    except SQLAlchemyError as exc:
        print(f"memoryd: {describe_db_error(exc, settings.storage)}", file=sys.stderr)
        return 1
    except (MemorydError, OSError, ValueError, subprocess.CalledProcessError) as exc:
        print(f"memoryd: {exc}", file=sys.stderr)
        return 1
