"""What the CLI's commands share: a scope from the arguments, validated, and JSON output."""

from __future__ import annotations

import argparse
import json
from typing import Any

from pydantic import BaseModel

from memoryd.models.schemas import Ident
from memoryd.settings import Settings


class ScopeArgs(BaseModel):
    agent_id: Ident
    user_id: Ident


class SessionArgs(ScopeArgs):
    session_id: Ident


def scope_args(ns: argparse.Namespace) -> ScopeArgs:
    return ScopeArgs(agent_id=ns.agent, user_id=ns.user)


def print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2, default=str))


def client(settings: Settings) -> Any:
    """A MemoryClient that leaves dispatch to the sweep (loaded when a command needs it)."""
    from memoryd.client import MemoryClient

    return MemoryClient(settings, dispatch=False)
