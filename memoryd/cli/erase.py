"""`memoryd erase`: every row of a user (or one session), removed from every table."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pydantic import BaseModel

from memoryd.cli.common import AS_STORED_HELP, client, print_json
from memoryd.memories.erasure import EraseRequest
from memoryd.models.schemas import Ident, StoredId
from memoryd.settings import Settings


class StoredErase(BaseModel):
    """--as-stored: the agent and user ids exactly as rows hold them."""

    agent_id: StoredId
    user_id: StoredId
    session_id: Ident | None = None


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "erase",
        help="remove everything stored about a user (or one session): not undoable",
        description="Remove every turn, session, summary, memory, usage row, profile and"
        " batch of a user (with --session: that session and the memories learnt from it)."
        " Safe to repeat and to run while workers run; prints the audit record.",
    )
    p.set_defaults(fn=cmd_erase)
    p.add_argument("--agent", required=True, help="the agent id")
    p.add_argument("--user", required=True, help="the user id")
    p.add_argument("--session", help="erase only this session (default: the whole user)")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--as-stored", action="store_true", help=AS_STORED_HELP)


def cmd_erase(settings: Settings, ns: argparse.Namespace) -> int:
    kind = StoredErase if ns.as_stored else EraseRequest
    args = kind(agent_id=ns.agent, user_id=ns.user, session_id=ns.session)
    what = f"user {args.user_id!r} of agent {args.agent_id!r}"
    if args.session_id:
        what = f"session {args.session_id!r} of {what}"
    if not ns.yes:
        if not sys.stdin.isatty():
            print(f"memoryd: erasing {what} cannot be undone; pass --yes", file=sys.stderr)
            return 2
        if input(f"Erase {what}? This cannot be undone. Type 'yes': ").strip() != "yes":
            print("nothing erased", file=sys.stderr)
            return 1
    erased = client(settings).erase(args.agent_id, args.user_id, args.session_id, actor="cli")
    print_json(erased.model_dump(mode="json"))
    return 0
