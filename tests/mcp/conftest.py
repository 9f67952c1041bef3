"""MCP fixtures: `memoryd mcp` run as a user runs it (a subprocess with MEMORYD_* set),
over stdio or streamable HTTP, reached with the official MCP SDK's own client."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from memoryd.models.db import session_scope, utcnow
from memoryd.server.keys import KeySpec, create_key
from memoryd.settings import Settings
from testkit.services import port_open, spare_port
from testkit.workers import REPO_ROOT, settings_env

# A connected SDK client for a key (None: send none).
Connect = Callable[[str | None], AbstractAsyncContextManager[Client]]


@dataclass
class Keys:
    ann: str  # agent "bot", user "ann" only
    bot: str  # agent "bot", any user
    ann_id: int


def make_key(settings: Settings, name: str, **spec: Any) -> tuple[int, str]:
    with session_scope(settings.storage) as session:
        key, secret = create_key(session, KeySpec(name=name, **spec), utcnow())
    return key.id, secret


@pytest.fixture
def mcp_settings(settings: Settings) -> Settings:
    # Keys are looked up on every call, so a revocation shows at once.
    return settings.updated(**{"api_key_cache_seconds": 0.0})


@pytest.fixture
def keys(mcp_settings: Settings) -> Keys:
    ann_id, ann = make_key(mcp_settings, "ann", agent_ids=["bot"], user_id="ann")
    _, bot = make_key(mcp_settings, "bot", agent_ids=["bot"])
    return Keys(ann=ann, bot=bot, ann_id=ann_id)


def stdio_params(settings: Settings, key: str | None) -> StdioServerParameters:
    env = settings_env(settings)
    if key is not None:
        env["MEMORYD_MCP_KEY"] = key
    return StdioServerParameters(
        command=sys.executable, args=["-m", "memoryd", "mcp"], env=env, cwd=REPO_ROOT
    )


def over_stdio(settings: Settings, errlog: TextIO) -> Connect:
    """`memoryd mcp` spawned per connection; its stderr goes to `errlog`."""

    def connect(key: str | None) -> AbstractAsyncContextManager[Client]:
        return Client(stdio_client(stdio_params(settings, key), errlog=errlog))

    return connect


def over_http(url: str) -> Connect:
    @asynccontextmanager
    async def connect(key: str | None) -> AsyncIterator[Client]:
        headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            yield client

    return connect


@contextmanager
def http_server(settings: Settings, log_path: Path) -> Iterator[str]:
    """`memoryd mcp --http` on a spare loopback port; yields the endpoint's URL."""
    port = spare_port()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "memoryd", "mcp", "--http", "--port", str(port)],
            env=settings_env(settings),
            cwd=REPO_ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while not port_open("127.0.0.1", port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"memoryd mcp --http did not start:\n{log_path.read_text()}")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=20)


@pytest.fixture
def stderr_log(tmp_path: Path) -> Iterator[TextIO]:
    with (tmp_path / "mcp-stderr.log").open("w+") as log:
        yield log


@pytest.fixture(params=["stdio", "http"])
def transport(
    request: pytest.FixtureRequest, mcp_settings: Settings, stderr_log: TextIO, tmp_path: Path
) -> Iterator[tuple[str, Connect]]:
    """Each transport in turn: (its name, how to connect with a key)."""
    if request.param == "stdio":
        yield "stdio", over_stdio(mcp_settings, stderr_log)
    else:
        with http_server(mcp_settings, tmp_path / "mcp-http.log") as url:
            yield url, over_http(url)
