"""`memoryd mcp`: the memory tools over the Model Context Protocol (extra `mcp`)."""

from __future__ import annotations

import argparse
import sys

from memoryd.cli.parsing import port
from memoryd.cli.serve import AddCommand
from memoryd.server.keys import KeyCache
from memoryd.settings import ServerSettings, Settings

SDK_MODULES = ("mcp", "mcp_types", "uvicorn", "starlette", "anyio", "fastapi")


def cmd_mcp(settings: Settings, ns: argparse.Namespace) -> int:
    try:
        from memoryd.mcp import server
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in SDK_MODULES:
            raise
        print("memoryd mcp needs the mcp extra: pip install 'memoryd[mcp]'", file=sys.stderr)
        return 2
    import anyio

    from memoryd.client import MemoryClient
    from memoryd.models.migrate import check_ready

    # Like `memoryd serve`: refuse a database that is unreachable or not migrated.
    check_ready(settings, wait_seconds=settings.worker.startup_wait_seconds)
    keys = KeyCache(settings, settings.server.api_key_cache_seconds)
    if not ns.http and (problem := _stdio_key_problem(settings.server, keys)):
        print(f"memoryd mcp: {problem}", file=sys.stderr)
        return 2
    # Over HTTP every call acts with its own request's key, never with MEMORYD_MCP_KEY.
    stdio_key = None if ns.http else settings.server.mcp_key
    tools = server.MemoryTools(settings, MemoryClient(settings), keys, stdio_key)
    try:
        if ns.http:
            server.serve_http(tools, ns.host, ns.port)
        else:
            anyio.run(server.serve_stdio, tools)
    finally:
        tools.client.close()
    return 0


def _stdio_key_problem(settings: ServerSettings, keys: KeyCache) -> str | None:
    """Why stdio cannot serve with MEMORYD_MCP_KEY, or None: said once at start, not as
    an error on every call."""
    if not settings.mcp_key:
        return "set MEMORYD_MCP_KEY to the API key its calls act with (memoryd keys create)"
    if keys.principal(settings.mcp_key) is None:
        return "MEMORYD_MCP_KEY is an unknown or revoked API key"
    return None


def add_command(add: AddCommand) -> None:
    p = add("mcp", cmd_mcp, "serve the memory tools over MCP (stdio; --http: streamable HTTP)")
    p.add_argument("--http", action="store_true", help="streamable HTTP at /mcp instead of stdio")
    p.add_argument("--host", default="127.0.0.1", help="with --http (default: %(default)s)")
    p.add_argument("--port", type=port, default=8081, help="with --http (default: %(default)s)")
