"""Who may do what: an API key per request (Bearer), checked against the scope it uses.

A key bound to agents may use only their scopes (and, bound to a user, only that user's
and the shared one); anything else is 403 before any data is read or written. Admin keys
may use every scope, the operations endpoints and the memory page (signed in once, then
by a session cookie: page_sessions.py).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from memoryd.models.db import session_scope, utcnow
from memoryd.server.keys import Principal
from memoryd.server.page_sessions import session_principal
from memoryd.server.problems import ProblemError
from memoryd.server.state import State

PAGE_COOKIE = "memoryd_session"


def authenticate(request: Request, state: State) -> Principal:
    header = request.headers.get("authorization", "")
    scheme, _, secret = header.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise ProblemError(
            401,
            "unauthorized",
            "send the API key as `Authorization: Bearer <key>`",
            headers={"WWW-Authenticate": "Bearer"},
        )
    principal = state.keys.principal(secret.strip())
    if principal is None:
        raise ProblemError(
            401,
            "unauthorized",
            "unknown or revoked API key",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return principal


def require_admin(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
    if not principal.admin:
        raise ProblemError(403, "forbidden", "this endpoint needs an admin key")
    return principal


Caller = Annotated[Principal, Depends(authenticate)]
Admin = Annotated[Principal, Depends(require_admin)]


def check_scope(principal: Principal, agent_id: str, user_id: str | None, *, write: bool) -> None:
    """403 unless the key may read (or write) this scope."""
    allowed = (
        principal.may_write(agent_id, user_id)
        if write and user_id is not None
        else principal.may_use(agent_id, user_id)
    )
    if not allowed:
        who = f"agent {agent_id!r}" + (f", user {user_id!r}" if user_id is not None else "")
        raise ProblemError(403, "forbidden", f"this key may not use {who}")


def page_principal(request: Request, state: State) -> Principal | None:
    """The admin behind the page's session cookie, or None (the page then asks for a
    key)."""
    token = request.cookies.get(PAGE_COOKIE)
    if not token:
        return None
    with session_scope(state.settings, readonly=True) as session:
        return session_principal(session, token, utcnow())
