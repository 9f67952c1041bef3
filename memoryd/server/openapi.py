"""The OpenAPI document of `memoryd serve`: FastAPI's, with what FastAPI cannot know.

- Request bodies as their validators take them (documented.py), among them those the
  routes check themselves: the turns list (TurnsRequest or one TurnIn) and each profile
  type's PUT and PATCH (profile_docs.py).
- Every error an operation can answer, as RFC 9457 problem JSON, with the headers that
  come with it (`Allow` on 405, `WWW-Authenticate` on 401, `Retry-After` on 503), in
  place of FastAPI's own validation error shape.
- Bearer keys, which every operation but the liveness probe needs.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import iter_route_contexts
from pydantic import BaseModel

from memoryd.models.schemas import TurnIn
from memoryd.server import documented, problems, profile_docs
from memoryd.server.schemas import TurnsRequest

PUBLIC = "/v1/health"  # liveness: no key, its own 503 body
SCOPE_FROM_KEY = "/api/v1/memories"  # seed 001's paths: the scope may come from the key
# Operations that change a memory whose state may not allow it.
CONFLICTS = {
    ("post", "/v1/memories/{agent_id}/{user_id}"),
    ("patch", "/v1/memories/{agent_id}/{user_id}/{memory_id}"),
    ("delete", "/v1/memories/{agent_id}/{user_id}/{memory_id}"),
    ("post", "/v1/memories/{agent_id}/{user_id}/{memory_id}/restore"),
}
HEADERS: dict[str, dict[str, Any]] = {
    "401": {"WWW-Authenticate": {"schema": {"type": "string"}, "description": "`Bearer`"}},
    "405": {
        "Allow": {"required": True, "schema": {"type": "string"}, "description": "its methods"}
    },
    "503": {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}},
}


def document(app: FastAPI, title: str, version: str, description: str) -> dict[str, Any]:
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(
        title=title,
        version=version,
        description=description,
        routes=app.routes,
        separate_input_output_schemas=False,  # one schema per model, as bodies are added
    )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    models: list[type[BaseModel]] = [TurnIn, TurnsRequest, problems.Problem]
    models += profile_docs.body_models() + body_models(app)
    components.update(documented.model_schemas(models))
    # A turn's text is refused past this server's MEMORYD_MAX_TURN_CHARS, not only past
    # the model's absolute cap.
    turn_text = components["TurnIn"]["properties"]["content"]
    turn_text["maxLength"] = min(
        turn_text["maxLength"], app.state.memoryd.settings.ingest.max_turn_chars
    )
    components.pop("HTTPValidationError", None)
    components.pop("ValidationError", None)
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)  # FastAPI's shape, never sent
            for status, description in error_statuses(method, path, operation).items():
                responses.setdefault(status, problem_response(status, description))
    prune(schema)
    schema["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    schema["security"] = [{"bearer": []}]
    schema["paths"][PUBLIC]["get"]["security"] = []
    app.openapi_schema = schema
    return schema


def body_models(app: FastAPI) -> list[type[BaseModel]]:
    """The models the routes validate bodies with."""
    found: list[type[BaseModel]] = []
    for route in iter_route_contexts(app.routes):
        field = getattr(route, "body_field", None)
        model = field.field_info.annotation if field is not None else None
        if isinstance(model, type) and issubclass(model, BaseModel) and model not in found:
            found.append(model)
    return found


def prune(schema: dict[str, Any]) -> None:
    """Drop the components no operation uses (the bodies and answers the routes take or
    give at run time, which the document shows typed in their place)."""
    components = schema["components"]["schemas"]
    used: set[str] = set()
    todo: list[Any] = [schema["paths"]]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and (name := ref.rsplit("/", 1)[-1]) not in used:
                used.add(name)
                todo.append(components.get(name))
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    for name in set(components) - used:
        del components[name]


def error_statuses(method: str, path: str, operation: dict[str, Any]) -> dict[str, str]:
    """The error statuses this operation can answer, with what each means here."""
    statuses = {
        "405": "Not a method of this path: `Allow` lists the ones it has",
        "422": "Invalid request: `errors` names each bad field",
    }
    if path != PUBLIC:
        statuses["401"] = "No key, or an unknown or revoked one"
        statuses["403"] = "The key may not use this scope or endpoint"
        statuses["503"] = "The database is unavailable; retry after `Retry-After` seconds"
    if "{" in path:
        statuses["404"] = "Not found in the scopes this key may use"
    if (method, path) in CONFLICTS:
        statuses["409"] = "The memory's state does not allow this change"
    bad_request = []
    if "requestBody" in operation:
        bad_request.append("a body that is not UTF-8 JSON")
        statuses["413"] = "The body is too large"
        statuses["415"] = "The body is not sent as `Content-Type: application/json`"
    if path.startswith(SCOPE_FROM_KEY):
        bad_request.append("a key bound to no one agent and user without agent_id and user_id")
    if bad_request:
        statuses["400"] = "Bad request: " + "; or ".join(bad_request)
    return dict(sorted(statuses.items()))


def problem_response(status: str, description: str) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": description,
        "content": {
            problems.MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}},
        },
    }
    if status in HEADERS:
        response["headers"] = HEADERS[status]
    return response
