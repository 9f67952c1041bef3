"""The `memoryd` command line. Arguments are validated with pydantic before anything runs."""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import SQLAlchemyError

from memoryd.cli import erase, memories, profile
from memoryd.cli.common import (
    InputError,
    SessionArgs,
    client,
    print_json,
    read_json_file,
    scope_args,
)
from memoryd.cli.serve import AddCommand, Command
from memoryd.cli.serve import add_commands as add_server_commands
from memoryd.errors import MemorydError, field_errors
from memoryd.models.db import describe_db_error
from memoryd.models.schemas import Ident, IngestResult
from memoryd.settings import Settings, explain, get_settings, masked_url

# ------------------------------------------------------------------------------- commands


def cmd_migrate(settings: Settings, _ns: argparse.Namespace) -> int:
    from memoryd.models.migrate import upgrade

    upgrade(settings, wait_seconds=settings.startup_wait_seconds)
    print(f"migrated {masked_url(settings.resolved_database_url)} to head")
    return 0


def _exec_celery(args: list[str]) -> int:
    argv = [sys.executable, "-m", "celery", "-A", "memoryd.worker", *args]
    os.execv(sys.executable, argv)
    return 0  # pragma: no cover - execv does not return


def cmd_worker(settings: Settings, ns: argparse.Namespace) -> int:
    # LLM calls are I/O bound: a threads pool with high concurrency keeps the CPU busy.
    concurrency = ns.concurrency or settings.worker_concurrency
    if ns.queues is None:
        from memoryd.worker.config import QUEUES

        ns.queues = ",".join(QUEUES)
    return _exec_celery(
        [
            "worker",
            f"--pool={ns.pool}",
            f"--concurrency={concurrency}",
            f"--queues={ns.queues}",
            f"--loglevel={ns.loglevel}",
            "-E",
        ]
    )


def cmd_beat(_settings: Settings, ns: argparse.Namespace) -> int:
    return _exec_celery(["beat", f"--loglevel={ns.loglevel}"])


def cmd_demo(settings: Settings, _ns: argparse.Namespace) -> int:
    from memoryd.cli.demo import run_demo

    return run_demo(settings)


def cmd_enqueue(settings: Settings, ns: argparse.Namespace) -> int:
    from memoryd.client import MemoryClient
    from memoryd.ingest.buffer import payload_items

    client = MemoryClient(settings, dispatch=not ns.no_dispatch)
    items: list[Any]
    named: list[tuple[str, str, str]] = []  # the session named on the command line
    if ns.file:
        items = payload_items(read_json_file(ns.file))
    else:
        key = SessionArgs(agent_id=ns.agent, user_id=ns.user, session_id=ns.session)
        named = [(key.agent_id, key.user_id, key.session_id)]
        items = [
            {
                "agent_id": ns.agent,
                "user_id": ns.user,
                "session_id": ns.session,
                "role": ns.role,
                "content": ns.content,
                "turn_key": ns.turn_key,
            }
        ]
    result = client.enqueue_turns(items)
    output = result.model_dump()
    if ns.end:
        # From a file as on the command line: the sessions of the turns given.
        ended = _stored(items, result) if ns.file else named
        output["ended_sessions"] = sum(client.end_session(*key) for key in ended)
    print_json(output)
    if not client.flush(timeout=10):
        print(
            "memoryd: the broker did not take the extract trigger; the turns are stored and "
            "beat's sweep will extract them",
            file=sys.stderr,
        )
    return 1 if result.rejected else 0


def _stored(items: list[Any], result: IngestResult) -> list[tuple[str, str, str]]:
    """The sessions of the items stored (now, or before: duplicates), each once, in order.
    A rejected item's ids may be what was wrong with it: its session is left alone."""
    rejected = {int(r["index"]) for r in result.rejected}
    keys = (
        SessionArgs.model_validate(item)  # the ids as stored (stripped)
        for index, item in enumerate(items)
        if index not in rejected
    )
    return list(dict.fromkeys((k.agent_id, k.user_id, k.session_id) for k in keys))


class RetryArgs(BaseModel):
    agent_id: Ident | None = None
    user_id: Ident | None = None
    session_id: Ident | None = None


def _dead_letter_filter(ns: argparse.Namespace) -> dict[str, str | None]:
    args = RetryArgs(
        agent_id=ns.agent or None, user_id=ns.user or None, session_id=ns.session or None
    )
    return args.model_dump()


def cmd_retry(settings: Settings, ns: argparse.Namespace) -> int:
    from memoryd.ingest.sweeper import retry_failed
    from memoryd.models.db import session_scope, utcnow

    which = _dead_letter_filter(ns)
    with session_scope(settings) as session:
        count = retry_failed(session, utcnow(), **which)
    print(f"{count} failed turns back to pending; the next sweep extracts them")
    return 0


def cmd_skip_or_purge(settings: Settings, ns: argparse.Namespace) -> int:
    from memoryd.ingest.sweeper import purge_failed, skip_failed
    from memoryd.models.db import session_scope

    if ns.command == "purge":
        settle, done = purge_failed, "deleted"
    else:
        settle, done = skip_failed, "skipped: kept as history, never extracted"
    which = _dead_letter_filter(ns)
    with session_scope(settings) as session:
        count = settle(session, **which)
    print(f"{count} failed turns {done}")
    return 0


def cmd_stats(settings: Settings, ns: argparse.Namespace) -> int:
    """The whole store's figures, or with --agent and --user only that scope's: the
    pipeline figures (batches, tokens, embeddings) are kept per store, not per scope."""
    if bool(ns.agent) != bool(ns.user):
        raise InputError("stats: give both --agent and --user (one scope), or neither")
    if ns.agent:
        scope = scope_args(ns)
        health = client(settings).health(scope.agent_id, scope.user_id)
        print_json({"scope": scope.model_dump(), "health": health.model_dump()})
        return 0
    from memoryd.extraction.stats import pipeline_stats

    health = client(settings).health()
    print_json({"pipeline": pipeline_stats(settings), "health": health.model_dump()})
    return 0


# ----------------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memoryd", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, fn: Command, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_)
        p.set_defaults(fn=fn)
        return p

    add("migrate", cmd_migrate, "create or upgrade the database schema")
    profile.add_parser(sub)
    erase.add_parser(sub)
    _add_process_commands(add)
    _add_pipeline_commands(add)
    memories.add_commands(add)
    add_server_commands(add)
    return parser


def _add_process_commands(add: AddCommand) -> None:
    p = add("worker", cmd_worker, "run a Celery worker (threads pool)")
    p.add_argument("--pool", default="threads", choices=["threads", "prefork", "gevent", "solo"])
    p.add_argument("--concurrency", type=int, default=0)
    p.add_argument("--queues", help="comma-separated (default: extraction,maintenance,embedding)")
    p.add_argument("--loglevel", default="INFO")
    p = add("beat", cmd_beat, "run Celery beat (maintenance schedule)")
    p.add_argument("--loglevel", default="INFO")
    add("demo", cmd_demo, "run the pipeline end to end on the embedded default")


def _add_pipeline_commands(add: AddCommand) -> None:
    p = add("enqueue", cmd_enqueue, "enqueue one turn, or a JSON payload file")
    p.add_argument("--agent", default="")
    p.add_argument("--user", default="")
    p.add_argument("--session", default="")
    p.add_argument("--role", default="user")
    p.add_argument("--content", default="")
    p.add_argument("--turn-key", default=None)
    p.add_argument("--file", help='payload file: {"turns": [...]} as for memoryd.ingest_turns')
    p.add_argument("--end", action="store_true", help="end the session after enqueueing")
    p.add_argument("--no-dispatch", action="store_true", help="leave dispatch to beat's sweep")
    for name, command, what in (
        ("retry", cmd_retry, "re-drive dead-lettered (failed) turns"),
        ("skip", cmd_skip_or_purge, "give up on dead-lettered turns: kept, never extracted"),
        ("purge", cmd_skip_or_purge, "delete dead-lettered turns, text and all"),
    ):
        p = add(name, command, what)
        p.add_argument("--agent", default="", help="only this agent's")
        p.add_argument("--user", default="", help="only this user's")
        p.add_argument("--session", default="", help="only this session's")
    p = add("stats", cmd_stats, "pipeline and memory health figures")
    p.add_argument("--agent", default="")
    p.add_argument("--user", default="")


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
    parser = build_parser()
    ns = parser.parse_args(argv)
    # Notices (an unknown MEMORYD_* variable, a refused embedding) read like the CLI's own.
    logging.basicConfig(format="memoryd: %(message)s")
    try:
        settings = get_settings()
    except ValidationError as exc:
        for line in explain(exc):
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
        print(f"memoryd: {describe_db_error(exc, settings)}", file=sys.stderr)
        return 1
    except (MemorydError, OSError, ValueError, subprocess.CalledProcessError) as exc:
        print(f"memoryd: {exc}", file=sys.stderr)
        return 1
