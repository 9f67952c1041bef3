"""The `memoryd` command line. Arguments are validated with pydantic before anything runs."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from memoryd.errors import MemorydError
from memoryd.schemas import Ident
from memoryd.settings import Settings, get_settings


class ScopeArgs(BaseModel):
    agent_id: Ident
    user_id: Ident


class SessionArgs(ScopeArgs):
    session_id: Ident


def _scope(ns: argparse.Namespace) -> ScopeArgs:
    return ScopeArgs(agent_id=ns.agent, user_id=ns.user)


def _print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2, default=str))


# ------------------------------------------------------------------------------- commands


def cmd_migrate(settings: Settings, _ns: argparse.Namespace) -> int:
    from memoryd.models.migrate import upgrade

    upgrade(settings)
    print(f"migrated {settings.resolved_database_url} to head")
    return 0


def _exec_celery(args: list[str]) -> int:
    argv = [sys.executable, "-m", "celery", "-A", "memoryd.worker", *args]
    os.execv(sys.executable, argv)
    return 0  # pragma: no cover - execv does not return


def cmd_worker(settings: Settings, ns: argparse.Namespace) -> int:
    # LLM calls are I/O bound: a threads pool with high concurrency keeps the CPU busy.
    concurrency = ns.concurrency or settings.worker_concurrency
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
    from memoryd.demo import run_demo

    return run_demo(settings)


def cmd_enqueue(settings: Settings, ns: argparse.Namespace) -> int:
    from memoryd.client import MemoryClient

    client = MemoryClient(settings, dispatch=not ns.no_dispatch)
    if ns.file:
        with open(ns.file, encoding="utf-8") as fh:
            payload = json.load(fh)
        result = client.ingest_payload(payload)
    else:
        SessionArgs(agent_id=ns.agent, user_id=ns.user, session_id=ns.session)
        result = client.enqueue_turns(
            [
                {
                    "agent_id": ns.agent,
                    "user_id": ns.user,
                    "session_id": ns.session,
                    "role": ns.role,
                    "content": ns.content,
                    "turn_key": ns.turn_key,
                }
            ]
        )
    _print_json(result.model_dump())
    if ns.end and ns.session:
        client.end_session(ns.agent, ns.user, ns.session)
    return 1 if result.rejected else 0


def cmd_retry(settings: Settings, ns: argparse.Namespace) -> int:
    from memoryd.buffer import SessionKey, retry_failed
    from memoryd.db import session_scope, utcnow

    key = None
    if ns.session:
        args = SessionArgs(agent_id=ns.agent, user_id=ns.user, session_id=ns.session)
        key = SessionKey(args.agent_id, args.user_id, args.session_id)
    with session_scope(settings) as session:
        count = retry_failed(session, utcnow(), key)
    print(f"{count} failed turns back to pending; the next sweep extracts them")
    return 0


def cmd_stats(settings: Settings, _ns: argparse.Namespace) -> int:
    from memoryd.stats import pipeline_stats

    _print_json(pipeline_stats(settings))
    return 0


# ----------------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memoryd", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def add(
        name: str, fn: Callable[[Settings, argparse.Namespace], int], help_: str
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_)
        p.set_defaults(fn=fn)
        return p

    add("migrate", cmd_migrate, "create or upgrade the database schema")
    p = add("worker", cmd_worker, "run a Celery worker (threads pool)")
    p.add_argument("--pool", default="threads", choices=["threads", "prefork", "gevent", "solo"])
    p.add_argument("--concurrency", type=int, default=0)
    p.add_argument("--queues", default="extraction,maintenance")
    p.add_argument("--loglevel", default="INFO")
    p = add("beat", cmd_beat, "run Celery beat (maintenance schedule)")
    p.add_argument("--loglevel", default="INFO")
    add("demo", cmd_demo, "run the pipeline end to end on the embedded default")

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

    p = add("retry", cmd_retry, "re-drive dead-lettered (failed) turns")
    p.add_argument("--agent", default="")
    p.add_argument("--user", default="")
    p.add_argument("--session", default="")
    add("stats", cmd_stats, "pipeline figures: turns by status, batches, tokens, rejections")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    try:
        settings = get_settings()
    except ValidationError as exc:
        print(f"memoryd: invalid settings:\n{exc}", file=sys.stderr)
        return 2
    fn: Callable[[Settings, argparse.Namespace], int] = ns.fn
    try:
        return fn(settings, ns)
    except ValidationError as exc:
        for err in exc.errors(include_url=False):
            field = ".".join(str(p) for p in err["loc"])
            print(f"memoryd: {field}: {err['msg']}", file=sys.stderr)
        return 2
    except MemorydError as exc:
        print(f"memoryd: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
