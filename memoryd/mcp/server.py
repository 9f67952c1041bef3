"""The MCP server of `memoryd mcp`: tools.py's tools over stdio or streamable HTTP.

Each call acts for an API key, checked by the HTTP API's own code (server/keys.py): over
HTTP the request's `Authorization: Bearer <key>` (a request without a live key is a 401
before the MCP layer reads it; wrong keys are throttled as the HTTP API's are), over
stdio the key in MEMORYD_MCP_KEY. A key may use the scopes it may use over HTTP and no
other. A refused, invalid or failed call is a tool error (`isError`) saying what to
fix; the server keeps serving.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import anyio.to_thread
import uvicorn
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from memoryd.client import MemoryClient
from memoryd.errors import DatabaseUnavailable, MemorydError, error_text, log_failure
from memoryd.mcp.tools import BY_NAME, TOOLS, Result
from memoryd.recall.tools import validated
from memoryd.server.auth import client_address, throttled_detail
from memoryd.server.keys import (
    NO_KEY,
    UNKNOWN_KEY,
    KeyCache,
    Principal,
    bearer_secret,
    refusal,
)
from memoryd.server.problems import problem_response
from memoryd.server.throttle import FailureThrottle
from memoryd.settings import Settings

log = logging.getLogger(__name__)

PATH = "/mcp"
INSTRUCTIONS = (
    "Long-term memory of this agent's users. Before a reply, get what memory holds for the "
    "user's message with memory_context (a block for the system prompt) or memory_recall "
    "(a ranked list). Save what the user asks you to remember, or states as a lasting fact "
    "or preference, with memory_save. Read or change the user's profile with profile_read "
    "and profile_patch. Call session_end when a conversation is over."
)
Context = ServerRequestContext[Any, Any]


class Refused(Exception):
    """A call its caller can correct: the message is the tool error it gets."""


@dataclass
class MemoryTools:
    """What every call needs: the client, the key cache, and over stdio the key."""

    settings: Settings
    client: MemoryClient
    keys: KeyCache
    stdio_key: str | None = None

    def principal(self, request: Request | None) -> Principal:
        """The key of the call: the HTTP request's, or over stdio (no request) the one
        the process was started with."""
        if request is None:
            secret = self.stdio_key
            missing = "set MEMORYD_MCP_KEY to an API key (memoryd keys create)"
        else:
            secret = bearer_secret(request.headers.get("authorization", ""))
            missing = NO_KEY
        if secret is None:
            raise Refused(missing)
        principal = self.keys.principal(secret)
        if principal is None:
            raise Refused(UNKNOWN_KEY)
        return principal

    def call(self, request: Request | None, name: str, arguments: dict[str, Any]) -> Result:
        """Run one tool call (in a worker thread: each step may read the database)."""
        principal = self.principal(request)
        tool = BY_NAME.get(name)
        if tool is None:
            raise Refused(f"unknown tool {name!r}; memoryd provides {sorted(BY_NAME)}")
        try:
            args = validated(tool.model, arguments)
        except ValueError as exc:
            raise Refused(str(exc)) from None
        if not principal.allows(args.agent_id, args.user_id, write=tool.write):
            raise Refused(refusal(args.agent_id, args.user_id))
        try:
            return tool.run(self.client, args)
        except DatabaseUnavailable:  # its text names the database: not for a caller
            raise Refused("the memory store is unavailable") from None
        except (MemorydError, ValueError) as exc:
            raise Refused(str(exc)) from None

    async def call_tool(self, ctx: Context, params: CallToolRequestParams) -> CallToolResult:
        call = partial(self.call, ctx.request, params.name, params.arguments or {})
        try:
            result = await anyio.to_thread.run_sync(call)
        except Refused as exc:
            return _error(str(exc))
        except Exception as exc:
            log_failure(log, f"MCP tool {params.name!r} failed", exc)
            return _error(f"memoryd failed ({error_text(exc)}); the server's log has the details")
        text = json.dumps(result, ensure_ascii=False)
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=result
        )


def _error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


async def list_tools(_ctx: Context, _params: PaginatedRequestParams | None) -> ListToolsResult:
    return ListToolsResult(
        tools=[
            Tool(name=t.name, description=t.description, input_schema=t.model.model_json_schema())
            for t in TOOLS
        ]
    )


def build_server(tools: MemoryTools) -> Server[Any]:
    return Server(
        "memoryd",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=tools.call_tool,
    )


async def serve_stdio(tools: MemoryTools) -> None:
    server = build_server(tools)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


class RequireKey:
    """ASGI middleware: a request without a live API key is refused with the HTTP API's
    own 401 problem before the MCP layer reads it; an address past
    MEMORYD_AUTH_FAILURE_LIMIT wrong keys a minute gets the API's 429 (server/throttle.py)."""

    def __init__(self, app: ASGIApp, keys: KeyCache, throttle: FailureThrottle) -> None:
        self.app = app
        self.keys = keys
        self.throttle = throttle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            request = Request(scope)
            refusal = await self._refusal(request)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _refusal(self, request: Request) -> JSONResponse | None:
        secret = bearer_secret(request.headers.get("authorization", ""))
        if secret is None:
            return _unauthorized(request, NO_KEY)
        address = client_address(request)
        if (wait := self.throttle.retry_after(address)) is not None:
            retry = {"Retry-After": str(wait)}
            detail = throttled_detail(wait)
            return problem_response(request, 429, "too-many-requests", detail, headers=retry)
        if await anyio.to_thread.run_sync(self.keys.principal, secret):
            return None
        self.throttle.failed(address)
        return _unauthorized(request, UNKNOWN_KEY)


def _unauthorized(request: Request, detail: str) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"}
    return problem_response(request, 401, "unauthorized", detail, headers=headers)


def http_app(tools: MemoryTools, host: str) -> ASGIApp:
    """The streamable HTTP app at /mcp, stateless: every request stands alone, so any
    process may answer it and nothing is kept between calls."""
    app = build_server(tools).streamable_http_app(
        streamable_http_path=PATH,
        stateless_http=True,
        max_request_body_size=tools.settings.server.max_request_bytes,
        host=host,  # on a loopback host, the SDK refuses other Host and Origin headers
    )
    return RequireKey(app, tools.keys, FailureThrottle(tools.settings.server.auth_failure_limit))


def serve_http(tools: MemoryTools, host: str, port: int) -> None:
    uvicorn.run(http_app(tools, host), host=host, port=port, access_log=False)
