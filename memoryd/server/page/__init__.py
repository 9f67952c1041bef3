"""The memory page: server-rendered HTML (Jinja2) with a little htmx, for admins.

NAV lists the page's areas; a new area (profiles) adds its router to PAGE_ROUTERS and
its entry to NAV."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import RedirectResponse, Response

from memoryd.server.page import actions, views
from memoryd.server.page.render import LoginRequired

PAGE_ROUTERS: list[APIRouter] = [views.router, actions.router]


def install(app: FastAPI) -> None:
    """The page's routes, and the sign-in redirect of a request without an admin cookie."""
    for router in PAGE_ROUTERS:
        app.include_router(router, include_in_schema=False)

    @app.exception_handler(LoginRequired)
    async def _login(request: Request, _exc: LoginRequired) -> Response:
        if request.headers.get("hx-request"):  # htmx follows this header, not a 303
            return Response(status_code=401, headers={"HX-Redirect": "/login"})
        return RedirectResponse("/login", status_code=303)
