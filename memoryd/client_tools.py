"""`MemoryClient.execute_tool`: a model's `memory_save` / `memory_recall` call run for one
scope (the tools' schema and arguments: recall/tools.py). A call the store or the checks
refuse answers {"ok": false, "error": ...} for the model to correct, never raises."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memoryd.errors import DatabaseUnavailable, MemorydError
from memoryd.recall.tools import MemoryRecallArgs, MemorySaveArgs, parse_tool_call, recalled

if TYPE_CHECKING:
    from memoryd.client import MemoryClient


def execute(
    client: MemoryClient,
    agent_id: str,
    user_id: str,
    name: str,
    arguments: str | dict[str, Any],
    shared: bool,
) -> dict[str, Any]:
    try:
        args = parse_tool_call(name, arguments)
        if isinstance(args, MemoryRecallArgs):
            return _recall(client, agent_id, user_id, args)
        return _save(client, agent_id, user_id, args, shared)
    except DatabaseUnavailable:  # its text names the database: not for a model
        return {"ok": False, "error": "the memory store is unavailable"}
    except (ValueError, MemorydError) as exc:
        return {"ok": False, "error": str(exc)}


def _recall(
    client: MemoryClient, agent_id: str, user_id: str, args: MemoryRecallArgs
) -> dict[str, Any]:
    categories = [args.type] if args.type else None
    hits = client.recall(args.query, agent_id, user_id, k=args.limit, categories=categories)
    return {"ok": True, "memories": [recalled(hit) for hit in hits]}


def _save(
    client: MemoryClient, agent_id: str, user_id: str, args: MemorySaveArgs, shared: bool
) -> dict[str, Any]:
    if args.action == "create":
        saved = client.remember(
            agent_id, user_id, args.content or "", category=args.type, name=args.name,
            shared=shared,
        )  # fmt: skip
    elif args.action == "update":
        saved = client.update(
            agent_id, user_id, args.id or 0, content=args.content, name=args.name or None,
            category=args.type, shared=shared,
        )  # fmt: skip
    else:
        saved = client.forget(agent_id, user_id, args.id or 0, shared=shared)
    return {"ok": True, "id": saved.id, "status": saved.status}
