"""Agent tools: OpenAI tool schemas and executing the calls a model makes."""

from __future__ import annotations

import json

from memoryd.client import MemoryClient
from memoryd.recall.tools import TOOLS
from memoryd.settings import Settings


def test_schemas_are_openai_tools() -> None:
    names = [t["function"]["name"] for t in TOOLS]
    assert names == ["memory_save", "memory_recall"]
    save = TOOLS[0]["function"]["parameters"]
    assert save["required"] == ["action"]
    assert set(save["properties"]) >= {"action", "name", "type", "content", "id"}
    assert TOOLS[1]["function"]["parameters"]["required"] == ["query"]
    json.dumps(TOOLS)  # serialisable as sent to the API


def test_save_recall_update_delete(settings: Settings) -> None:
    client = MemoryClient(settings)
    created = client.execute_tool(
        "bot",
        "ann",
        "memory_save",
        json.dumps(
            {
                "action": "create",
                "name": "style",
                "type": "feedback",
                "content": "Keep answers under five sentences",
            }
        ),
    )
    assert created["ok"] and created["status"] == "active"
    found = client.execute_tool("bot", "ann", "memory_recall", '{"query": "answers sentences"}')
    assert [m["id"] for m in found["memories"]] == [created["id"]]
    assert found["memories"][0]["type"] == "feedback"
    updated = client.execute_tool(
        "bot",
        "ann",
        "memory_save",
        {"action": "update", "id": created["id"], "content": "Keep answers under three sentences"},
    )
    assert updated == {"ok": True, "id": created["id"], "status": "active"}
    deleted = client.execute_tool(
        "bot", "ann", "memory_save", {"action": "delete", "id": created["id"]}
    )
    assert deleted["status"] == "deleted"
    assert (
        client.execute_tool("bot", "ann", "memory_recall", {"query": "answers"})["memories"] == []
    )


def test_bad_calls_return_errors_for_the_model(settings: Settings) -> None:
    client = MemoryClient(settings)
    cases = [
        ("memory_save", "{not json"),
        ("memory_save", {"action": "create"}),
        ("memory_save", {"action": "delete"}),
        ("memory_save", {"action": "explode", "content": "x"}),
        ("memory_recall", {"query": "x", "limit": 500}),
        ("memory_forget_all", {}),
        ("memory_save", {"action": "delete", "id": 12345}),
    ]
    for name, args in cases:
        result = client.execute_tool("bot", "ann", name, args)
        assert result["ok"] is False and result["error"], (name, args)
