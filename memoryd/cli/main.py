"""The `memoryd` command line. Arguments are validated with pydantic before anything runs."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import SQLAlchemyError

from memoryd.cli import erase, profile
from memoryd.cli.serve import AddCommand, Command
from memoryd.cli.serve import add_commands as add_server_commands
from memoryd.errors import MemorydError, field_errors
from memoryd.models.db import describe_db_error
from memoryd.models.schemas import Ident
from memoryd.settings import Settings, explain, get_settings, masked_url


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
    if ns.end and ns.session:
        client.end_session(ns.agent, ns.user, ns.session)
    _print_json(result.model_dump())
    if not client.flush(timeout=10):
        print(
            "memoryd: the broker did not take the extract trigger; the turns are stored and "
            "beat's sweep will extract them",
            file=sys.stderr,
        )
    return 1 if result.rejected else 0


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
    from memoryd.extraction.stats import pipeline_stats

    health = _client(settings).health(ns.agent or None, ns.user or None)
    _print_json({"pipeline": pipeline_stats(settings), "health": health.model_dump()})
    return 0


def _client(settings: Settings) -> Any:
    from memoryd.client import MemoryClient

    return MemoryClient(settings, dispatch=False)


def _table(rows: list[Any]) -> None:
    print(
        f"{'id':>6}  {'user':<10} {'category':<9} {'tier':<5} {'status':<10} {'conf':>4}  content"
    )
    for m in rows:
        score = f"  (score {m.score:.3f})" if hasattr(m, "score") else ""
        print(
            f"{m.id:>6}  {m.user_id[:10]:<10} {m.category:<9} {m.tier:<5} {m.status:<10} "
            f"{m.confidence:>4.2f}  {m.content}{score}"
        )


def cmd_list(settings: Settings, ns: argparse.Namespace) -> int:
    scope = _scope(ns)
    _table(
        _client(settings).list(
            scope.agent_id,
            scope.user_id,
            statuses=ns.status or ["active"],
            categories=ns.category,
            limit=ns.limit,
            offset=ns.offset,
        )
    )
    return 0


def cmd_search(settings: Settings, ns: argparse.Namespace) -> int:
    scope = _scope(ns)
    _table(_client(settings).recall(ns.query, scope.agent_id, scope.user_id, k=ns.k))
    return 0


def cmd_show(settings: Settings, ns: argparse.Namespace) -> int:
    scope = _scope(ns)
    _print_json(_client(settings).get(scope.agent_id, scope.user_id, ns.id).model_dump())
    return 0


def cmd_history(settings: Settings, ns: argparse.Namespace) -> int:
    scope = _scope(ns)
    for e in _client(settings).history(scope.agent_id, scope.user_id, ns.id):
        change = f"{e.before_content!r} -> {e.after_content!r}" if e.before_content else ""
        print(f"{e.created_at:%Y-%m-%d %H:%M:%S}  {e.kind:<10} by {e.actor:<11} {change}")
    return 0


def cmd_delete(settings: Settings, ns: argparse.Namespace) -> int:
    scope = _scope(ns)
    memory = _client(settings).forget(scope.agent_id, scope.user_id, ns.id)
    print(f"memory {memory.id} deleted (restorable with memoryd restore)")
    return 0


def cmd_restore(settings: Settings, ns: argparse.Namespace) -> int:
    scope = _scope(ns)
    memory = _client(settings).restore(scope.agent_id, scope.user_id, ns.id)
    print(f"memory {memory.id} is {memory.status} again")
    return 0


def cmd_export(settings: Settings, ns: argparse.Namespace) -> int:
    from memoryd.memories.transfer import export_memories
    from memoryd.models.db import session_scope

    out = open(ns.file, "w", encoding="utf-8") if ns.file else sys.stdout  # noqa: SIM115
    try:
        with session_scope(settings, readonly=True) as session:
            for line in export_memories(session, ns.agent or None, ns.user or None):
                out.write(line + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


def cmd_import(settings: Settings, ns: argparse.Namespace) -> int:
    from memoryd.memories.transfer import import_memories
    from memoryd.models.db import utcnow

    with open(ns.file, encoding="utf-8") as fh:
        result = import_memories(settings, fh, utcnow())
    _print_json(result)
    return 1 if result["errors"] else 0


def cmd_embed(settings: Settings, ns: argparse.Namespace) -> int:
    from memoryd.recall import backfill

    if not settings.embeddings_on:
        raise ValueError("embeddings are off: set MEMORYD_EMBEDDING_MODEL (and a provider)")
    if ns.reset:
        print(f"cleared {backfill.reset_vectors(settings)} vectors")
    total = backfill.fill_missing(settings, limit=sys.maxsize)  # each memory tried once
    found = backfill.coverage(settings)
    _print_json(
        {
            "embedded": total,
            "active_with_vector": found.embedded,
            "missing": found.missing,
            "refused": found.refused,
        }
    )
    return 1 if found.missing else 0


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
    _add_memory_commands(add)
    _add_transfer_commands(add)
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


def _add_memory_commands(add: AddCommand) -> None:
    """The commands that read or change one scope's memories."""

    def scoped(name: str, fn: Command, help_: str) -> argparse.ArgumentParser:
        p = add(name, fn, help_)
        p.add_argument("--agent", required=True)
        p.add_argument("--user", required=True)
        return p

    p = scoped("list", cmd_list, "list a scope's memories, newest first")
    p.add_argument(
        "--status",
        action="append",
        default=None,
        choices=["active", "superseded", "archived", "expired", "deleted"],
    )
    p.add_argument("--category", action="append", default=None)
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--offset", type=int, default=0)
    p = scoped("search", cmd_search, "ranked recall for a query")
    p.add_argument("query")
    p.add_argument("-k", type=int, default=10)
    for name, fn, help_ in [
        ("show", cmd_show, "one memory as JSON"),
        ("history", cmd_history, "a memory's history"),
        ("delete", cmd_delete, "soft-delete a memory"),
        ("restore", cmd_restore, "restore an archived/expired/deleted memory"),
    ]:
        scoped(name, fn, help_).add_argument("id", type=int)


def _add_transfer_commands(add: AddCommand) -> None:
    p = add("export", cmd_export, "all memories (every status) as JSON lines")
    p.add_argument("--agent", default="")
    p.add_argument("--user", default="")
    p.add_argument("--file", help="write here instead of standard output")
    p = add("import", cmd_import, "add memories from a JSON lines file (an export)")
    p.add_argument("--file", required=True)
    p = add("embed", cmd_embed, "embed every active memory that has no vector yet")
    p.add_argument("--reset", action="store_true", help="re-embed all (after a model change)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    try:
        settings = get_settings()
    except ValidationError as exc:
        for line in explain(exc):
            print(f"memoryd: invalid setting: {line}", file=sys.stderr)
        return 2
    fn: Command = ns.fn
    try:
        return fn(settings, ns)
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
