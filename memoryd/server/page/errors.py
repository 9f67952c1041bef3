"""Errors on the page read as sentences, not problem JSON.

The API answers every error as problem JSON (server/problems.py). The page's own
requests get the same answer as HTML in the page's language: an htmx request a
fragment that htmx puts in the page's error line (HX-Retarget #page-error, never into
the card that asked), a page opened in the browser (a bad ?offset=) an error page. The
detail is worded from the error itself (wording.py), not copied from the problem's
English."""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from starlette.responses import Response

from memoryd.server.page.render import LoginRequired, Page
from memoryd.server.problems import MEDIA_TYPE

Handler = Callable[[Request, Any], Awaitable[Response] | Response]
KEPT_HEADERS = ("allow", "retry-after")


def install(app: FastAPI, page_endpoints: set[Any]) -> None:
    """Wrap each problem handler already installed: page requests get HTML."""
    for kind, handler in list(app.exception_handlers.items()):
        if kind is not LoginRequired:
            app.exception_handlers[kind] = _readable(handler, page_endpoints)


def _readable(handler: Handler, page_endpoints: set[Any]) -> Callable[..., Awaitable[Response]]:
    async def handle(request: Request, exc: Any) -> Response:
        answer = handler(request, exc)
        response = await answer if inspect.isawaitable(answer) else answer
        if response.media_type != MEDIA_TYPE:
            return response
        htmx = bool(request.headers.get("hx-request"))
        endpoint = getattr(request.scope.get("route"), "endpoint", None)
        opened = endpoint in page_endpoints and "text/html" in request.headers.get("accept", "")
        if not (htmx or opened):
            return response
        return _as_html(request, response, htmx, exc)

    return handle


def _as_html(request: Request, problem: Response, htmx: bool, exc: BaseException) -> Response:
    body = json.loads(bytes(problem.body))
    slug = str(body.get("type", "")).rsplit("/", 1)[-1]
    template = "_error.html" if htmx else "error.html"
    page = Page(request)
    detail = page.wording.of(exc, body.get("detail"))
    html = page.render(template, status=problem.status_code, slug=slug, detail=detail)
    for name in KEPT_HEADERS:
        if name in problem.headers:
            html.headers[name] = problem.headers[name]
    if htmx:
        html.headers["HX-Retarget"] = "#page-error"
        html.headers["HX-Reswap"] = "innerHTML"
    return html
