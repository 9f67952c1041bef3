"""`memoryd mcp` through the official MCP SDK's client, over stdio and streamable HTTP,
on PostgreSQL and SQLite: every tool, the API keys' scopes, refused keys, bad calls."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx
from mcp import Client
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.testclient import TestClient

from memoryd.client import MemoryClient
from memoryd.mcp import server
from memoryd.mcp.tools import BY_NAME
from memoryd.models.db import session_scope, utcnow
from memoryd.models.tables import ChatSession
from memoryd.recall.tools import TOOLS as AGENT_TOOLS
from memoryd.server.keys import KeyCache, revoke_key
from memoryd.settings import Settings
from testkit.workers import REPO_ROOT
from tests.mcp.conftest import Connect, Keys, http_server, over_stdio

ANN = {"agent_id": "bot", "user_id": "ann"}
BOB = {"agent_id": "bot", "user_id": "bob"}
MCP_ACCEPT = "application/json, text/event-stream"
TOOL_NAMES = {
    "memory_save",
    "memory_recall",
    "memory_context",
    "profile_read",
    "profile_patch",
    "session_end",
    "turn_status",
}


async def call(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    structured: dict[str, Any] | None = result.structured_content
    assert structured is not None
    return structured


async def refusal(client: Client, name: str, **arguments: Any) -> str:
    """The text of a call's tool error (the call must fail as a tool error)."""
    result = await client.call_tool(name, arguments)
    assert result.is_error, result.content
    (content,) = result.content
    return str(getattr(content, "text", ""))


def start_session(settings: Settings, user_id: str) -> None:
    turn = {**ANN, "user_id": user_id, "session_id": "s1", "role": "user", "content": "Hello"}
    turn["turn_key"] = "t-hello"
    MemoryClient(settings, dispatch=False).enqueue_turn(turn)


def ended(db: Session, user_id: str) -> bool:
    db.rollback()  # a fresh snapshot: the server wrote after this session last read
    row = select(ChatSession.ended_at).where(
        ChatSession.agent_id == "bot", ChatSession.user_id == user_id
    )
    return db.scalar(row) is not None


def test_every_tool_acts_on_the_keys_scope(
    transport: tuple[str, Connect], keys: Keys, mcp_settings: Settings, db: Session
) -> None:
    _, connect = transport
    start_session(mcp_settings, "ann")

    async def scenario() -> None:
        async with connect(keys.ann) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(listed) == TOOL_NAMES
            for name, tool in listed.items():
                assert tool.input_schema == BY_NAME[name].model.model_json_schema()
                assert {"agent_id", "user_id"} <= set(tool.input_schema["required"])

            saved = await call(
                client, "memory_save", action="create", content="Vegetarian since 2019", **ANN
            )
            found = await call(client, "memory_recall", query="vegetarian", **ANN)
            assert [(m["id"], m["content"]) for m in found["memories"]] == [
                (saved["id"], "Vegetarian since 2019")
            ]
            before = {"as_of": "2000-01-01T00:00:00Z", **ANN}
            assert await call(client, "memory_recall", query="vegetarian", **before) == {
                "memories": []
            }
            assert await call(client, "memory_context", query="cook vegetarian", **before) == {
                "context": ""
            }
            context = await call(client, "memory_context", query="cook vegetarian", **ANN)
            assert context["context"].startswith("<memory-context>")
            assert "Vegetarian since 2019" in context["context"]

            patched = await call(
                client, "profile_patch", patch={"timezone": "Europe/Lisbon"}, **ANN
            )
            read = await call(client, "profile_read", type="user", **ANN)
            assert read["content"]["timezone"] == "Europe/Lisbon"
            assert read["version"] == patched["version"] == 1
            status = await call(client, "turn_status", turn_keys=["t-hello", "unknown"], **ANN)
            assert [(t["turn_key"], t["status"]) for t in status["turns"]] == [
                ("t-hello", "pending")
            ]
            assert await call(client, "session_end", session_id="s1", **ANN) == {"ended": True}

    anyio.run(scenario)
    memories = MemoryClient(mcp_settings).list("bot", "ann")
    assert [m.content for m in memories] == ["Vegetarian since 2019"]
    assert ended(db, "ann")


def test_a_scope_key_cannot_touch_another_scope(
    transport: tuple[str, Connect], keys: Keys, mcp_settings: Settings, db: Session
) -> None:
    _, connect = transport
    start_session(mcp_settings, "bob")
    other_agent = {"agent_id": "other", "user_id": "ann"}
    shared = {"agent_id": "bot", "user_id": "*"}
    refused: list[tuple[str, dict[str, Any]]] = [
        ("memory_save", {**BOB, "action": "create", "content": "Bob likes jazz"}),
        ("memory_recall", {**BOB, "query": "jazz"}),
        ("memory_context", {**other_agent, "query": "jazz"}),
        ("profile_read", BOB),
        ("profile_patch", {**BOB, "patch": {"timezone": "Asia/Tokyo"}}),
        ("session_end", {**BOB, "session_id": "s1"}),
        # Bound to one user, the key reads the agent's shared scope but may not write it.
        ("profile_patch", {**shared, "type": "work", "patch": {"team": "core"}}),
    ]

    async def scenario() -> None:
        async with connect(keys.ann) as client:
            for name, arguments in refused:
                text = await refusal(client, name, **arguments)
                who = f"agent {arguments['agent_id']!r}, user {arguments['user_id']!r}"
                assert text == f"this key may not use {who}", name
            await call(client, "profile_read", type="work", **shared)
        async with connect(keys.bot) as client:  # any user of its agent, not another agent
            await call(client, "memory_recall", query="jazz", **BOB)
            # An agent's key writes its shared scope, through both write tools alike.
            content = "The team meets on Mondays"
            await call(client, "memory_save", action="create", content=content, **shared)
            assert "may not use agent 'other'" in await refusal(
                client, "memory_recall", query="jazz", **other_agent
            )

    anyio.run(scenario)
    memory = MemoryClient(mcp_settings)
    assert [m.user_id for m in memory.list("bot", "bob")] == ["*"]  # none of bob's own
    assert memory.profile("bot", "bob", "user").version == 0
    assert memory.profile("bot", "*", "work").version == 0
    assert [m.content for m in memory.list("bot", "*")] == ["The team meets on Mondays"]
    assert not ended(db, "bob")


def test_a_wrong_or_missing_key_is_refused(
    transport: tuple[str, Connect], keys: Keys, stderr_log: TextIO
) -> None:
    where, connect = transport

    async def connects(key: str | None) -> bool:
        try:
            async with connect(key) as client:
                await client.list_tools()
        except Exception:
            return False
        return True

    assert anyio.run(connects, keys.ann)
    bad_key = "mk_" + "x" * 43
    for key, said in ((None, "set MEMORYD_MCP_KEY"), (bad_key, "MEMORYD_MCP_KEY is an unknown")):
        assert not anyio.run(connects, key)
        if where == "stdio":  # the process said why in one line, and stopped
            stderr_log.seek(0)
            assert stderr_log.read().splitlines()[-1].startswith(f"memoryd mcp: {said}")
        else:  # the HTTP API's own answer, before the MCP layer reads the request
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            answer = httpx.post(where, headers=headers, json={}, timeout=60)
            assert answer.status_code == 401, answer.text
            assert answer.headers["www-authenticate"] == "Bearer"
            assert answer.json()["detail"] in (
                "send the API key as `Authorization: Bearer <key>`",
                "unknown or revoked API key",
            )


def test_http_refuses_other_hosts_and_huge_bodies(
    keys: Keys, mcp_settings: Settings, tmp_path: Path
) -> None:
    settings = mcp_settings.updated(**{"max_request_bytes": 4096})
    headers = {"Authorization": f"Bearer {keys.ann}", "Accept": MCP_ACCEPT}
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}
    with http_server(settings, tmp_path / "mcp-http.log") as url:
        assert httpx.post(url, headers=headers, json=ping, timeout=60).status_code == 200
        rebound = {**headers, "Host": "attacker.example"}  # DNS rebinding: another name
        assert httpx.post(url, headers=rebound, json=ping, timeout=60).status_code == 421
        huge = {**ping, "params": {"padding": "x" * 5000}}
        assert httpx.post(url, headers=headers, json=huge, timeout=60).status_code == 413


def test_a_key_revoked_while_connected_stops_working(
    keys: Keys, mcp_settings: Settings, stderr_log: TextIO
) -> None:
    async def scenario() -> None:
        async with over_stdio(mcp_settings, stderr_log)(keys.ann) as client:
            await call(client, "memory_recall", query="anything", **ANN)
            with session_scope(mcp_settings.storage) as session:
                revoke_key(session, keys.ann_id, utcnow())
            text = await refusal(client, "memory_recall", query="anything", **ANN)
            assert text == "unknown or revoked API key"

    anyio.run(scenario)


def test_bad_calls_are_tool_errors_naming_the_field(
    keys: Keys, mcp_settings: Settings, stderr_log: TextIO
) -> None:
    bad: list[tuple[str, dict[str, Any], list[str]]] = [
        (
            "memory_recall",
            {**ANN, "limit": 99, "bogus": 1},
            ["query: Field required", "limit: ", "bogus: "],
        ),
        ("memory_save", {**ANN, "action": "create"}, ["create needs 'content'"]),
        ("memory_save", {**ANN, "action": "create", "content": "x", "type": "gossip"}, ["type: "]),
        ("memory_context", {"agent_id": "", "user_id": "ann", "query": "q"}, ["agent_id: "]),
        ("profile_patch", {**ANN, "patch": {"favourite_colour": "red"}}, ["favourite_colour"]),
        ("profile_read", {**ANN, "type": "home"}, ["type: "]),
        ("session_end", ANN, ["session_id: Field required"]),
        ("session_end", {**ANN, "session_id": "never"}, ["no session 'never'"]),
        ("memory_forget", ANN, ["unknown tool 'memory_forget'"]),
    ]

    async def scenario() -> None:
        async with over_stdio(mcp_settings, stderr_log)(keys.ann) as client:
            for name, arguments, said in bad:
                text = await refusal(client, name, **arguments)
                assert all(part in text for part in said), (name, text)
            # The server kept serving.
            await call(client, "memory_save", action="create", content="Still here", **ANN)

    anyio.run(scenario)


def test_save_and_recall_take_the_agent_tools_arguments() -> None:
    """One definition: the MCP tools are the agent tools (recall/tools.py) plus a scope
    (and for recall, `as_of`: looking into the past is for operators, not offered to
    models)."""
    for agent_tool in AGENT_TOOLS:
        function = agent_tool["function"]
        tool = BY_NAME[function["name"]]
        schema = tool.model.model_json_schema()
        own = function["parameters"]["properties"]
        assert {k: schema["properties"][k] for k in own} == own
        extra = {"as_of"} if function["name"] == "memory_recall" else set()
        assert set(schema["properties"]) - set(own) == {"agent_id", "user_id", *extra}
        assert tool.description == function["description"]


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_mcp_without_the_extra_says_what_to_install() -> None:
    out = python(
        "import sys; sys.modules['mcp'] = None  # as if the SDK were not installed\n"
        "from memoryd.cli.main import main; sys.exit(main(['mcp']))"
    )
    assert out.returncode == 2
    assert out.stderr == "memoryd mcp needs the mcp extra: pip install 'memoryd[mcp]'\n"


def test_importing_memoryd_does_not_import_the_sdk() -> None:
    out = python(
        "import sys, memoryd, memoryd.cli.main, memoryd.mcp.tools\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types')))"
    )
    assert (out.returncode, out.stdout) == (0, "[]\n"), out.stderr


def test_wrong_keys_over_http_are_throttled_like_the_apis(
    keys: Keys, mcp_settings: Settings
) -> None:
    """Past MEMORYD_AUTH_FAILURE_LIMIT wrong keys from one address, MCP over HTTP answers
    429 with Retry-After, a right key included, as the HTTP API does; no key is no guess."""
    limited = mcp_settings.updated(**{"auth_failure_limit": 3})
    tools = server.MemoryTools(limited, MemoryClient(limited), KeyCache(limited, 0.0))
    mcp = TestClient(server.http_app(tools, "127.0.0.1"), base_url="http://127.0.0.1")
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}
    for _ in range(5):
        assert mcp.post(server.PATH, json=ping).status_code == 401  # no key: not counted
    for _ in range(3):
        wrong = mcp.post(server.PATH, json=ping, headers={"Authorization": "Bearer mk_wrong"})
        assert wrong.status_code == 401
    right = {"Authorization": f"Bearer {keys.ann}", "Accept": MCP_ACCEPT}
    refused = mcp.post(server.PATH, json=ping, headers=right)
    assert refused.status_code == 429 and 1 <= int(refused.headers["retry-after"]) <= 60
    assert refused.json()["type"] == "/problems/too-many-requests"
