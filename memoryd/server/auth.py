"""Who may do what: an API key per request (Bearer), checked against the scope it uses.

A key bound to agents may use only their scopes (and, bound to a user, only that user's
and the shared one); anything else is 403 before any data is read or written. Admin keys
may use every scope, the operations endpoints and the memory page (as a cookie).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from memoryd.server.keys import Principal
from memoryd.server.problems import ProblemError
from memoryd.server.state import State

PAGE_COOKIE = "memoryd_key"


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
    """The admin behind the page's cookie, or None (the page then asks for a key)."""
    secret = request.cookies.get(PAGE_COOKIE)
    if not secret:
        return None
    principal = state.keys.principal(secret)
    return principal if principal is not None and principal.admin else None
