"""The CLI's pipeline commands: enqueue turns, settle dead-lettered ones, the figures."""

from __future__ import annotations

import argparse
import sys
from typing import Any, get_args

from pydantic import BaseModel

from memoryd.cli.common import (
    InputError,
    SessionArgs,
    client,
    print_json,
    read_json_file,
    scope_args,
)
from memoryd.cli.serve import AddCommand
from memoryd.models.schemas import Ident, IngestResult, Role
from memoryd.settings import Settings


def add_commands(add: AddCommand) -> None:
    _add_enqueue(add)
    for name, command, what in (
        ("retry", cmd_retry, "re-drive dead-lettered (failed) turns: back to pending"),
        ("skip", cmd_skip_or_purge, "give up on dead-lettered turns: kept, never extracted"),
        ("purge", cmd_skip_or_purge, "delete dead-lettered turns, text and all"),
    ):
        p = add(name, command, what)
        p.add_argument("--agent", default="", help="only this agent's (default: every agent's)")
        p.add_argument("--user", default="", help="only this user's (default: every user's)")
        p.add_argument("--session", default="", help="only this session's (default: all)")
    p = add("stats", cmd_stats, "the store's pipeline figures and memory health, or one scope's")
    p.add_argument("--agent", default="", help="with --user: only this scope's figures")
    p.add_argument("--user", default="", help="with --agent: only this scope's figures")


def _add_enqueue(add: AddCommand) -> None:
    p = add("enqueue", cmd_enqueue, "store one turn, or the turns of a JSON payload file")
    p.add_argument("--agent", default="", help="the turn's agent id (unless --file)")
    p.add_argument("--user", default="", help="the turn's user id (unless --file)")
    p.add_argument("--session", default="", help="the turn's session id (unless --file)")
    p.add_argument("--role", default="user", choices=get_args(Role), help="who said it")
    p.add_argument("--content", default="", help="what was said (unless --file)")
    p.add_argument(
        "--turn-key", default=None, help="an id of the turn: enqueueing it again stores nothing"
    )
    p.add_argument(
        "--file",
        help='the turns from this JSON file instead: {"turns": [...]} as for '
        "memoryd.ingest_turns, a list, or one turn ('-': standard input)",
    )
    p.add_argument(
        "--end",
        action="store_true",
        help="then end the session (with --file: each session of the turns stored), so its "
        "remaining turns are extracted now",
    )
    p.add_argument(
        "--no-dispatch", action="store_true", help="send no trigger: leave it to beat's sweep"
    )


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
    with session_scope(settings.storage) as session:
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
    with session_scope(settings.storage) as session:
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
