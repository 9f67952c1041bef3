"""What every answer of the server carries, and what a browser request must show.

- Security headers on every response: a Content-Security-Policy that runs only the
  server's own scripts and styles, no framing, no MIME sniffing, no Referer; and
  `Cache-Control: no-store` on all but the static files, so no browser cache or proxy
  keeps a page or an answer that shows what a user said.
- A state-changing request that carries the page's session cookie, or no
  Authorization header (the sign-in form), must come from the page's own origin:
  browsers say where a request comes from (`Sec-Fetch-Site`, `Origin`), and another
  site's form post or script is refused with 403 before any route runs. API calls carry
  their key in a Bearer header that no other site can make a browser send, so they pass
  (a browser may add Basic credentials of a proxy by itself: the cookie still counts).
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memoryd.server import problems
from memoryd.server.auth import PAGE_COOKIE

SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
        b" object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]
NO_STORE = (b"cache-control", b"no-store")
STATIC_PREFIX = "/static/"  # the mount of memoryd/server/static (app.py): no user data
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}


class PageGuard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not same_origin(scope):
            response = problems.problem_response(
                None, 403, "cross-origin", "a state-changing request from another origin"
            )
            await response(scope, receive, self._with_headers(scope, send))
            return
        await self.app(scope, receive, self._with_headers(scope, send))

    @staticmethod
    def _with_headers(scope: Scope, send: Send) -> Send:
        static = str(scope.get("path", "")).startswith(STATIC_PREFIX)
        wanted = SECURITY_HEADERS if static else [*SECURITY_HEADERS, NO_STORE]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                have = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(n, v) for n, v in wanted if n not in have]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        return sending


def same_origin(scope: Scope) -> bool:
    """False for a browser's state-changing request that another site started."""
    headers = Headers(scope=scope)
    if scope["method"] in SAFE_METHODS:
        return True
    if "authorization" in headers and f"{PAGE_COOKIE}=" not in headers.get("cookie", ""):
        return True
    site = headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")  # "none": the user typed or bookmarked it
    origin = headers.get("origin")
    if origin is None:
        return True  # not a browser (curl, a test client): it sends no ambient cookie
    host = headers.get("host", "")
    return origin in (f"http://{host}", f"https://{host}")
