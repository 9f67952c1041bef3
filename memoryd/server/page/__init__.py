"""The memory page: server-rendered HTML (Jinja2) with a little htmx, for admins.

NAV (render.py) lists the page's areas; each area's routes are in PAGE_ROUTERS."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import RedirectResponse, Response

from memoryd.server.page import actions, errors, profiles, views
from memoryd.server.page.render import LoginRequired

PAGE_ROUTERS: list[APIRouter] = [views.router, actions.router, profiles.router]


def install(app: FastAPI) -> None:
    """The page's routes and the sign-in redirect of a request without a session (the
    guard against other sites' requests, guard.py, wraps the whole app)."""
    for router in PAGE_ROUTERS:
        app.include_router(router, include_in_schema=False)
    errors.install(app, {route.endpoint for r in PAGE_ROUTERS for route in r.routes})  # type: ignore[attr-defined]

    @app.exception_handler(LoginRequired)
    async def _login(request: Request, _exc: LoginRequired) -> Response:
        if request.headers.get("hx-request"):  # htmx follows this header, not a 303
            return Response(status_code=401, headers={"HX-Redirect": "/login"})
        return RedirectResponse("/login", status_code=303)
