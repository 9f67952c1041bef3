"""Who may do what: an API key per request (Bearer), checked against the scope it uses.

A key bound to agents may use only their scopes (and, bound to a user, only that user's
and the shared one); anything else is 403 before any data is read or written. Admin keys
may use every scope, the operations endpoints and the memory page (signed in once, then
by a session cookie: page_sessions.py).
"""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import Depends, Request

from memoryd.async_client import in_thread
from memoryd.models.db import session_scope, utcnow
from memoryd.server.keys import NO_KEY, UNKNOWN_KEY, Principal, bearer_secret, refusal
from memoryd.server.page_sessions import session_principal
from memoryd.server.problems import ProblemError
from memoryd.server.state import State

PAGE_COOKIE = "memoryd_session"


async def authenticate(request: Request, state: State) -> Principal:
    """The key's principal; a route's body checks (strict.py) may have found it already.
    A key looked up of late is checked on the event loop; only an unknown one waits on
    the database, in a thread: every hop to a thread costs a request its latency."""
    known: Principal | None = getattr(request.state, "principal", None)
    if known is not None:
        return known
    secret = bearer_secret(request.headers.get("authorization", ""))
    if secret is None:
        raise ProblemError(
            401,
            "unauthorized",
            NO_KEY,
            headers={"WWW-Authenticate": "Bearer"},
        )
    address = client_address(request)
    throttled(state, address)
    cached, principal = state.keys.cached(secret)
    if not cached:
        principal = await in_thread(state.pool, partial(state.keys.principal, secret))
    if principal is None:
        state.throttle.failed(address)
        raise ProblemError(
            401,
            "unauthorized",
            UNKNOWN_KEY,
            headers={"WWW-Authenticate": "Bearer"},
        )
    request.state.principal = principal
    return principal


def client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def throttled(state: State, address: str) -> None:
    """429 while `address` has failed too many key checks of late (throttle.py)."""
    if (wait := state.throttle.retry_after(address)) is not None:
        detail = throttled_detail(wait)
        raise ProblemError(429, "too-many-requests", detail, headers={"Retry-After": str(wait)})


def throttled_detail(wait: int) -> str:
    return f"too many wrong keys from this address: try again in {wait} s"


async def require_admin(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
    if not principal.admin:
        raise ProblemError(403, "forbidden", "this endpoint needs an admin key")
    return principal


Caller = Annotated[Principal, Depends(authenticate)]
Admin = Annotated[Principal, Depends(require_admin)]


def check_scope(principal: Principal, agent_id: str, user_id: str | None, *, write: bool) -> None:
    """403 unless the key may read (or write) this scope."""
    if not principal.allows(agent_id, user_id, write=write):
        raise ProblemError(403, "forbidden", refusal(agent_id, user_id))


def page_principal(request: Request, state: State) -> Principal | None:
    """The admin behind the page's session cookie, or None (the page then asks for a
    key)."""
    token = request.cookies.get(PAGE_COOKIE)
    if not token:
        return None
    with session_scope(state.settings.storage, readonly=True) as session:
        return session_principal(session, token, utcnow())
