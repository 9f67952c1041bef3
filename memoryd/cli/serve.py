"""`memoryd serve` and `memoryd keys`: the HTTP server and its API keys."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable

from memoryd.cli.parsing import port, whole
from memoryd.models.db import session_scope, utcnow
from memoryd.monitoring import MULTIPROC_ENV
from memoryd.settings import Settings

Command = Callable[[Settings, argparse.Namespace], int]
AddCommand = Callable[[str, Command, str], argparse.ArgumentParser]  # adds a subcommand


def cmd_serve(settings: Settings, ns: argparse.Namespace) -> int:
    try:
        import uvicorn
    except ImportError:
        print(
            "memoryd serve needs the server extra: pip install 'memoryd[server]'", file=sys.stderr
        )
        return 2
    from memoryd.models.migrate import check_ready

    # Like a worker: refuse to serve a database that is unreachable or not migrated.
    check_ready(settings, wait_seconds=settings.worker.startup_wait_seconds)
    if ns.workers > 1:
        # Each worker process counts on its own; /metrics adds them up from this folder.
        os.environ.setdefault(MULTIPROC_ENV, tempfile.mkdtemp(prefix="memoryd-metrics-"))
        uvicorn.run(
            "memoryd.server.app:create_app",
            factory=True,
            host=ns.host,
            port=ns.port,
            workers=ns.workers,
            access_log=ns.access_log,
        )
        return 0
    from memoryd.server.app import create_app

    uvicorn.run(create_app(settings), host=ns.host, port=ns.port, access_log=ns.access_log)
    return 0


def cmd_keys(settings: Settings, ns: argparse.Namespace) -> int:
    from memoryd.server.keys import KeySpec, create_key, list_keys, revoke_key

    with session_scope(settings.storage) as session:
        if ns.action == "create":
            spec = KeySpec(name=ns.name, agent_ids=ns.agent or [], user_id=ns.user, admin=ns.admin)
            key, secret = create_key(session, spec, utcnow())
            scope = "every agent (admin)" if key.admin else ", ".join(key.agent_ids)
            user = f", user {key.user_id}" if key.user_id else ""
            print(f"key {key.id} ({key.name}) for {scope}{user}; shown only now:")
            print(secret)
        elif ns.action == "list":
            print(
                f"{'id':>4}  {'prefix':<11} {'name':<20} {'admin':<5}  {'revoked':<8} agents / user"
            )
            for k in list_keys(session):
                revoked = "yes" if k.revoked_at else ""
                print(
                    f"{k.id:>4}  {k.prefix:<11} {k.name[:20]:<20} {k.admin!s:<5}  {revoked:<8} "
                    f"{','.join(k.agent_ids) or '*'}{' / ' + k.user_id if k.user_id else ''}"
                )
        else:
            revoke_key(session, ns.id, utcnow())
            print(
                f"key {ns.id} revoked (servers stop accepting it within "
                f"{settings.server.api_key_cache_seconds:g} s)"
            )
    return 0


def add_commands(add: AddCommand) -> None:
    p = add("serve", cmd_serve, "run the HTTP API, /metrics and the memory page")
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    p.add_argument("--port", type=port, default=8080, help="the port to listen on")
    p.add_argument("--workers", type=whole(1, 64), default=1, help="uvicorn worker processes")
    p.add_argument("--access-log", action="store_true", help="log every request")

    p = add("keys", cmd_keys, "create, list or revoke HTTP API keys")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    what = "a new key, printed once"
    create = actions.add_parser("create", help=what, description=what)
    create.add_argument("--name", required=True, help="what the key is for, to tell keys apart")
    create.add_argument("--agent", action="append", help="an agent the key may use (repeat)")
    create.add_argument("--user", default=None, help="bind the key to one user of its agents")
    create.add_argument("--admin", action="store_true", help="every agent, ops and the page")
    what = "every key (never the secret)"
    actions.add_parser("list", help=what, description=what)
    what = "stop a key from working"
    revoke = actions.add_parser("revoke", help=what, description=what)
    revoke.add_argument("id", type=whole(1), help="the key's id, as keys list shows it")
