"""Errors as RFC 9457 problem details (`application/problem+json`), naming the field.

Every error a handler can meet maps to one problem type here, so no handler formats an
error itself and no exception reaches the client as a bare 500 page.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from functools import cache
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import compile_path

from memoryd.errors import (
    DatabaseUnavailable,
    InvalidState,
    MemoryRejected,
    NotFound,
    ProfileRejected,
    SharedScopeError,
    TurnRejected,
    error_message,
    error_text,
    field_errors,
    log_failure,
)

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/problem+json"

# type slug -> (title, what it means); each is documented at /problems/<slug>.
PROBLEM_TYPES: dict[str, tuple[str, str]] = {
    "invalid-request": (
        "Invalid request",
        "The body or a parameter failed validation; `errors` names each field.",
    ),
    "unauthorized": ("Unauthorized", "Send `Authorization: Bearer <key>` with a live API key."),
    "forbidden": ("Forbidden", "The key is not bound to this agent or user, or is not admin."),
    "cross-origin": (
        "Cross-origin request",
        "A state-changing request without an API key that another site started (the"
        " page's forms work from the page only).",
    ),
    "not-found": ("Not found", "No such resource in the scopes this key may use."),
    "conflict": ("Conflict", "The resource is in a state that does not allow this change."),
    "scope-needed": (
        "Scope needed",
        "The key is not bound to one agent and one user: name them with agent_id and user_id.",
    ),
    "too-large": ("Request too large", "The body exceeds MEMORYD_MAX_REQUEST_BYTES."),
    "too-many-requests": (
        "Too many requests",
        "Too many wrong keys from this address (MEMORYD_AUTH_FAILURE_LIMIT a minute): wait"
        " for Retry-After.",
    ),
    "unsupported-media-type": (
        "Unsupported media type",
        "A body must be JSON, sent with `Content-Type: application/json`.",
    ),
    "unavailable": ("Service unavailable", "The database cannot be reached; retry later."),
    "internal": ("Internal error", "An unexpected error; the server log has the details."),
    "http": ("HTTP error", "A protocol-level error (unknown path, wrong method)."),
}


class FieldError(BaseModel):
    field: str
    message: str


class Problem(BaseModel):
    """RFC 9457 problem details; `errors` lists each bad field for invalid requests."""

    type: str
    title: str
    status: int
    detail: str
    instance: str | None = None
    errors: list[FieldError] | None = None


class ProblemError(Exception):
    """Raised by handlers and dependencies; rendered as problem JSON."""

    def __init__(
        self,
        status: int,
        slug: str,
        detail: str,
        errors: list[FieldError] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.slug = slug
        self.detail = detail
        self.errors = errors
        self.headers = headers


def invalid(field: str, message: str) -> ProblemError:
    return ProblemError(
        422, "invalid-request", f"{field}: {message}", [FieldError(field=field, message=message)]
    )


def problem_response(
    request: Request | None,
    status: int,
    slug: str,
    detail: str,
    errors: list[FieldError] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    title, _ = PROBLEM_TYPES[slug]
    body = Problem(
        type=f"/problems/{slug}",
        title=title,
        status=status,
        detail=detail,
        instance=request.url.path if request is not None else None,
        errors=errors,
    )
    return JSONResponse(
        body.model_dump(exclude_none=True), status, headers=headers, media_type=MEDIA_TYPE
    )


def _field_name(loc: tuple[Any, ...] | list[Any]) -> str:
    """pydantic's location as a path: ("body", "turns", 0, "content") -> turns[0].content."""
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header", "cookie"):
        parts = parts[1:]
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(body)"


def _validation_problem(request: Request, errors: list[FieldError]) -> JSONResponse:
    first = errors[0] if errors else FieldError(field="(body)", message="invalid")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    detail = f"{first.field}: {first.message}{more}"
    return problem_response(request, 422, "invalid-request", detail, errors)


Handler = Callable[[Request, Any], Awaitable[JSONResponse]]


def install(app: FastAPI) -> None:
    """Register the handlers that turn every error into problem JSON."""
    for kind, handler in _handlers().items():
        app.add_exception_handler(kind, handler)


def _handlers() -> dict[type[Exception], Handler]:
    return {
        ProblemError: _problem,
        RequestValidationError: _request_invalid,
        ValidationError: _model_invalid,
        ProfileRejected: _profile_rejected,
        MemoryRejected: _memory_rejected,
        TurnRejected: _plain(422, "invalid-request"),
        SharedScopeError: _plain(403, "forbidden"),
        NotFound: _plain(404, "not-found"),
        # A change the memory's state does not allow; any other error is a bug (500,
        # logged), never dressed up as a conflict.
        InvalidState: _plain(409, "conflict"),
        OperationalError: _database_down,
        DatabaseUnavailable: _database_down,
        StarletteHTTPException: _http,
        Exception: _unexpected,
    }


def _plain(status: int, slug: str) -> Handler:
    """A handler answering `status` with the exception's own message."""

    async def handle(request: Request, exc: Exception) -> JSONResponse:
        return problem_response(request, status, slug, str(exc))

    return handle


async def _problem(request: Request, exc: ProblemError) -> JSONResponse:
    return problem_response(request, exc.status, exc.slug, exc.detail, exc.errors, exc.headers)


async def _request_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = [_field_error(e) for e in exc.errors()]
    return _validation_problem(request, errors)


def _field_error(error: Any) -> FieldError:
    """One of FastAPI's errors as a problem's: a body that is no JSON at all is the
    body's, at a character (FastAPI puts the character where a field goes: "[50]")."""
    if error["type"] == "json_invalid":
        at = error["loc"][-1]
        return FieldError(field="(body)", message=f"not valid JSON (at character {at})")
    return FieldError(field=_field_name(error["loc"]), message=error_message(error))


async def _model_invalid(request: Request, exc: ValidationError) -> JSONResponse:
    errors = [FieldError(field=f or "(body)", message=m) for f, m in field_errors(exc)]
    return _validation_problem(request, errors)


async def _profile_rejected(request: Request, exc: ProfileRejected) -> JSONResponse:
    errors = [FieldError(field=f"content.{e['field']}", message=e["message"]) for e in exc.errors]
    return _validation_problem(request, errors)


async def _memory_rejected(request: Request, exc: MemoryRejected) -> JSONResponse:
    errors = [FieldError(field=e["field"], message=e["message"]) for e in exc.errors]
    return _validation_problem(request, errors)


async def _database_down(request: Request, exc: Exception) -> JSONResponse:
    log.warning("database error on %s: %s", request.url.path, error_text(exc))
    return problem_response(
        request, 503, "unavailable", "the database is unavailable", headers={"Retry-After": "5"}
    )


async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    slug = {401: "unauthorized", 403: "forbidden", 404: "not-found", 413: "too-large"}
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = allowed_methods(request)
    return problem_response(
        request, exc.status_code, slug.get(exc.status_code, "http"), str(exc.detail), None, headers
    )


def allowed_methods(request: Request) -> str:
    """Every method some route answers at this path (RFC 9110's `Allow`): the methods
    of one path are spread over several routes, so the router's own list is short."""
    methods: set[str] = set()
    for route in iter_route_contexts(request.app.routes):
        path = route.path_format
        if route.methods and path and _path_regex(path).match(request.url.path):
            methods |= route.methods
    return ", ".join(sorted(methods))


@cache
def _path_regex(path_format: str) -> re.Pattern[str]:
    return compile_path(path_format)[0]


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log_failure(log, f"unexpected error on {request.method} {request.url.path}", exc)
    return problem_response(request, 500, "internal", f"unexpected {type(exc).__name__}")
