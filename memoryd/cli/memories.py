"""The CLI's memory commands: read and change one scope's memories, export, import, embed."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from functools import partial
from typing import Any

from memoryd.cli.common import AS_STORED_HELP, every_page, open_input, printable
from memoryd.cli.common import client as _client
from memoryd.cli.common import print_json as _print_json
from memoryd.cli.common import scope_args as _scope
from memoryd.cli.parsing import whole
from memoryd.cli.serve import AddCommand, Command
from memoryd.models.schemas import MAX_PAGE, MAX_TOKEN_BUDGET
from memoryd.settings import Settings

AS_OF_HELP = "what memory held at this moment (ISO 8601 with a timezone): read only"


def add_commands(add: AddCommand) -> None:
    _add_memory_commands(add)
    _add_transfer_commands(add)


def _table(rows: list[Any]) -> None:
    print(
        f"{'id':>6}  {'user':<10} {'category':<9} {'tier':<5} {'status':<10} {'conf':>4}  content"
    )
    for m in rows:
        score = f"  (score {m.score:.3f})" if hasattr(m, "score") else ""
        print(
            f"{m.id:>6}  {m.user_id[:10]:<10} {m.category:<9} {m.tier:<5} {m.status:<10} "
            f"{m.confidence:>4.2f}  {printable(m.content)}{score}"
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
            as_of=ns.as_of,
        )
    )
    return 0


def cmd_search(settings: Settings, ns: argparse.Namespace) -> int:
    scope = _scope(ns)
    client = _client(settings)
    _table(client.recall(ns.query, scope.agent_id, scope.user_id, k=ns.k, as_of=ns.as_of))
    return 0


def cmd_context(settings: Settings, ns: argparse.Namespace) -> int:
    scope = _scope(ns)
    client = _client(settings)
    block = client.build_context(
        ns.query, scope.agent_id, scope.user_id, token_budget=ns.budget, as_of=ns.as_of
    )
    print(printable(block, keep="\n") if block else "(nothing fits)")
    return 0


def _instant(value: str) -> datetime:
    """--as-of's value: an ISO 8601 moment with a timezone."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 date and time: {value!r}") from None
    if moment.utcoffset() is None:
        raise argparse.ArgumentTypeError("give a timezone, e.g. 2026-03-01T00:00:00Z")
    return moment


def cmd_show(settings: Settings, ns: argparse.Namespace) -> int:
    scope = _scope(ns)
    _print_json(_client(settings).get(scope.agent_id, scope.user_id, ns.id).model_dump())
    return 0


def cmd_history(settings: Settings, ns: argparse.Namespace) -> int:
    scope, client = _scope(ns), _client(settings)
    page = partial(client.history, scope.agent_id, scope.user_id, ns.id)
    for e in every_page(lambda after: page(after=after), lambda e: e.id):
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
        with session_scope(settings.storage, readonly=True) as session:
            for line in export_memories(session, ns.agent or None, ns.user or None):
                out.write(line + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


def cmd_import(settings: Settings, ns: argparse.Namespace) -> int:
    from memoryd.memories.transfer import import_memories
    from memoryd.models.db import utcnow

    with open_input(ns.file) as fh:
        result = import_memories(settings, fh, utcnow())
    _print_json(result)
    return 1 if result["errors"] else 0


def cmd_embed(settings: Settings, ns: argparse.Namespace) -> int:
    from memoryd.recall import backfill

    if not settings.embeddings_on:
        raise ValueError("embeddings are off: set MEMORYD_EMBEDDING_MODEL (and a provider)")
    if ns.reset:
        print(f"cleared {backfill.reset_vectors(settings.storage)} vectors")
    # Each memory tried once; another model's vectors only when asked (a shell whose
    # settings name an old model must not take the store back to it).
    total = backfill.fill_missing(settings, limit=sys.maxsize, other_models=ns.other_models)
    found = backfill.coverage(settings)
    _print_json(
        {
            "embedded": total,
            "active_with_vector": found.embedded,
            "missing": found.missing,
            "refused": found.refused,
            "another_models_vectors": found.other_model,  # --other-models embeds them
        }
    )
    return 1 if found.missing else 0


def _add_memory_commands(add: AddCommand) -> None:
    """The commands that read or change one scope's memories."""
    _add_list_command(add)
    _add_query_commands(add)
    for name, fn, help_ in [
        ("show", cmd_show, "one memory as JSON"),
        ("history", cmd_history, "a memory's history"),
        ("delete", cmd_delete, "soft-delete a memory (restorable for a while)"),
        ("restore", cmd_restore, "restore an archived/expired/deleted memory"),
    ]:
        _scoped(add, name, fn, help_).add_argument("id", type=whole(1), help="the memory's id")


def _scoped(add: AddCommand, name: str, fn: Command, help_: str) -> argparse.ArgumentParser:
    """A command of one scope: --agent and --user."""
    p = add(name, fn, help_)
    p.add_argument("--agent", required=True, help="the agent id")
    p.add_argument("--user", required=True, help="the user id ('*': the agent's shared memories)")
    return p


def _add_list_command(add: AddCommand) -> None:
    p = _scoped(add, "list", cmd_list, "list a scope's memories, newest first")
    p.add_argument(
        "--status",
        action="append",
        default=None,
        choices=["active", "superseded", "archived", "expired", "deleted"],
        help="only memories with this status; repeat for several (default: active)",
    )
    p.add_argument(
        "--category",
        action="append",
        default=None,
        help="only this category, e.g. user or project; repeat for several (default: all)",
    )
    p.add_argument(
        "--limit", type=whole(1, MAX_PAGE), default=50, help=f"how many to show, at most {MAX_PAGE}"
    )
    p.add_argument("--offset", type=whole(0), default=0, help="skip this many first: the next page")
    p.add_argument("--as-of", type=_instant, help=AS_OF_HELP)
    p.add_argument("--as-stored", action="store_true", help=AS_STORED_HELP)


def _add_query_commands(add: AddCommand) -> None:
    """search and context: a scope's memories for a query."""
    p = _scoped(add, "search", cmd_search, "ranked recall for a query")
    p.add_argument("query", help="what to recall, as a user would ask")
    p.add_argument("-k", type=whole(1, MAX_PAGE), default=10, help="how many memories")
    p.add_argument("--as-of", type=_instant, help=AS_OF_HELP)
    p = _scoped(add, "context", cmd_context, "the <memory-context> block for a query")
    p.add_argument("query", help="what the next reply is about, as a user would ask")
    p.add_argument(
        "--budget",
        type=whole(1, MAX_TOKEN_BUDGET),
        default=None,
        help="most tokens (default: the agent's)",
    )
    p.add_argument("--as-of", type=_instant, help=AS_OF_HELP)


def _add_transfer_commands(add: AddCommand) -> None:
    p = add("export", cmd_export, "all memories (every status) as JSON lines")
    p.add_argument("--agent", default="", help="only this agent's (default: every agent's)")
    p.add_argument("--user", default="", help="only this user's (default: every user's)")
    p.add_argument("--file", help="write here (default: standard output)")
    p = add("import", cmd_import, "add memories from a JSON lines file (an export)")
    p.add_argument("--file", required=True, help="the file memoryd export wrote")
    p = add("embed", cmd_embed, "embed every active memory that has no vector yet")
    p.add_argument("--reset", action="store_true", help="drop every vector and re-embed all")
    p.add_argument(
        "--other-models",
        action="store_true",
        help="also embed again every vector another model wrote (as beat does after a "
        "model change)",
    )
