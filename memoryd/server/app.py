"""The ASGI app of `memoryd serve`: the API routers, /metrics, the page, problem JSON.

Handlers are thin: they validate with pydantic, check the key's scope and call the same
plain functions and MemoryClient methods a Python backend uses.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from urllib.parse import parse_qsl, unquote_to_bytes

from fastapi import FastAPI, HTTPException
from fastapi.responses import PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memoryd.client import MemoryClient
from memoryd.models.checks import scrubbed, text_problem
from memoryd.server import docs, metrics, openapi, page, problems
from memoryd.server.keys import KeyCache
from memoryd.server.page.guard import PageGuard
from memoryd.server.routes import ROUTERS
from memoryd.server.state import ServerState
from memoryd.server.throttle import FailureThrottle
from memoryd.settings import Settings, get_settings

STATIC_DIR = Path(__file__).with_name("static")
TITLE = "memoryd"
VERSION = "1"
DESCRIPTION = (
    "Long-term memory for LLM chat agents. Send `Authorization: Bearer <key>` "
    "(`memoryd keys create`). Errors are RFC 9457 problem details naming the field."
)


class BodyLimit:
    """Refuse bodies over `max_bytes` with 413 before they are read into memory: by the
    declared Content-Length at once, or while a chunked body streams in."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            response = problems.problem_response(
                None, 413, "too-large", f"the body is over {self.max_bytes} bytes"
            )
            await response(scope, receive, send)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise HTTPException(413, f"the body is over {self.max_bytes} bytes")
            return message

        await self.app(scope, limited, send)


class PlainUrl:
    """Refuse with 422, naming the parameter, a path or query string that carries what
    no database stores faithfully (a NUL or another control character, bytes that are
    not UTF-8): before any route or page filter reads it, so none has to remember to."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (found := url_problem(scope)) is not None:
            field, message = found
            errors = [problems.FieldError(field=field, message=message)]
            response = problems.problem_response(
                None, 422, "invalid-request", f"{field}: {message}", errors
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def url_problem(scope: Scope) -> tuple[str, str] | None:
    """(field, what is wrong) of the first bad part of the request's path or query."""
    if problem := text_problem(scope.get("path", "")) or _raw_path_problem(scope):
        return "(path)", problem
    query = scope.get("query_string", b"").decode("latin-1")
    # Undecodable bytes become lone surrogates, which text_problem names.
    for name, value in parse_qsl(query, keep_blank_values=True, errors="surrogateescape"):
        if problem := text_problem(name) or text_problem(value):
            return scrubbed(name) or "(query)", problem
    return None


def _raw_path_problem(scope: Scope) -> str | None:
    """The path as sent, percent-escapes undone, must be UTF-8: the decoded `path` shows
    any bytes that are not as U+FFFD, so two different ids would meet in one scope."""
    raw = scope.get("raw_path")
    try:
        unquote_to_bytes(raw or b"").decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"bytes that are not UTF-8 at byte {exc.start}"
    return None


def create_app(settings: Settings | None = None, *, client: MemoryClient | None = None) -> FastAPI:
    settings = settings or get_settings()
    client = client or MemoryClient(settings)
    # The routes' own threads (state.pool): as many as the database has connections,
    # the pool's and its overflow, so a call waits for a thread, not for a connection.
    pool = ThreadPoolExecutor(
        settings.storage.db_pool_size + settings.storage.db_max_overflow,
        thread_name_prefix="memoryd-route",
    )
    app = FastAPI(
        title=TITLE,
        version=VERSION,
        description=DESCRIPTION,
        docs_url=None,  # FastAPI's own pages load scripts from a CDN: docs.py serves them
        redoc_url=None,
        lifespan=_lifespan(pool, client),
    )
    app.state.memoryd = ServerState(
        settings=settings,
        client=client,
        keys=KeyCache(settings, settings.server.api_key_cache_seconds),
        pool=pool,
        throttle=FailureThrottle(settings.server.auth_failure_limit),
    )
    _install_routes(app, settings)
    app.openapi = lambda: openapi.document(app, TITLE, VERSION, DESCRIPTION)  # type: ignore[method-assign]
    app.add_middleware(BodyLimit, max_bytes=settings.server.max_request_bytes)
    app.add_middleware(PlainUrl)
    app.add_middleware(PageGuard)  # last added, outermost: every answer gets its headers
    return app


def _lifespan(
    pool: ThreadPoolExecutor, client: MemoryClient
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        # A request cancelled at shutdown may still be storing in a thread: let it end
        # before the client closes under it.
        await asyncio.to_thread(pool.shutdown, wait=True)
        client.close()

    return lifespan


def _install_routes(app: FastAPI, settings: Settings) -> None:
    """The API routers, the page, the docs, static files, /metrics and problem types."""
    problems.install(app)
    for router in ROUTERS:
        app.include_router(router)
    page.install(app)
    docs.install(app)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    registry = metrics.metrics_registry(settings)

    @app.get("/metrics", include_in_schema=False)
    def prometheus_metrics() -> Response:
        return Response(metrics.render(registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/problems/{slug}", include_in_schema=False)
    def problem_type(slug: str) -> PlainTextResponse:
        title, meaning = problems.PROBLEM_TYPES.get(slug, ("Unknown problem type", ""))
        return PlainTextResponse(f"{title}\n\n{meaning}\n")
