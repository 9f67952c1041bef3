"""Request bodies taken as the OpenAPI document types them, not as pydantic's lax mode
would read them: JSON only (a body without `Content-Type: application/json` is a 415,
not a puzzling 422), and each value of the JSON type its schema names (`true` is no
integer, `"5"` no number, `1` no boolean, a number no date), before any model sees it;
and the API key checked before the body is read.

Every API router makes its routes with JsonRoute."""

from __future__ import annotations

import difflib
import itertools
import json
import re
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from pydantic import BaseModel

from memoryd.server.auth import authenticate
from memoryd.server.problems import FieldError, ProblemError, invalid
from memoryd.server.state import server_state

Schema = dict[str, Any]
NOT_JSON = "send the body as JSON with `Content-Type: application/json`"
# JSON types, as JSON Schema names them, in the words a problem uses.
NAMES = {
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "string": "a string",
    "null": "null",
    "array": "an array",
    "object": "an object",
}


class JsonRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        needs_key = _authenticates(self.dependant)
        known = query_names(self.dependant)
        handler = _known_queries_only(super().get_route_handler(), known, needs_key)
        if self.body_field is None:
            return handler
        annotation = self.body_field.field_info.annotation
        # A body of no one model (the turns' list, judged item by item) is left to it.
        typed = isinstance(annotation, type) and issubclass(annotation, BaseModel)

        async def checked(request: Request) -> Response:
            if needs_key:
                # The key first: a caller without a live one is refused before the body
                # is read, and learns nothing of what it should hold.
                await authenticate(request, server_state(request))
            body = await request.body()
            if body and not is_json(request.headers.get("content-type", "")):
                raise ProblemError(415, "unsupported-media-type", NOT_JSON)
            check_depth(body)
            if body and typed:
                check_types(request, self, body)
            return await handler(request)

        return checked


def query_names(dependant: Dependant) -> frozenset[str]:
    """The query parameters a route reads, its dependencies' too."""
    names = {param.alias for param in dependant.query_params}
    return frozenset(names.union(*(query_names(d) for d in dependant.dependencies)))


def _known_queries_only(
    handler: Callable[[Request], Coroutine[Any, Any, Response]],
    known: frozenset[str],
    needs_key: bool,
) -> Callable[[Request], Coroutine[Any, Any, Response]]:
    """`handler`, refusing a query parameter the route does not read: `?catgory=user`
    answered every category, as if the filter held (a misspelt body field is a 422).
    The key first, where the route takes one: a caller without one learns nothing of
    what the route reads."""

    async def checked(request: Request) -> Response:
        unknown = sorted(set(request.query_params) - known)
        if unknown and needs_key:
            await authenticate(request, server_state(request))
        if unknown:
            close = difflib.get_close_matches(unknown[0], known, n=1)
            takes = f"did you mean {close[0]}?" if close else _takes(known)
            raise invalid(unknown[0], f"not a query parameter of this route; {takes}")
        return await handler(request)

    return checked


def _takes(known: frozenset[str]) -> str:
    return f"it takes {', '.join(sorted(known))}" if known else "it takes none"


def _authenticates(dependant: Dependant) -> bool:
    """Whether the route checks an API key (itself or through require_admin)."""
    return any(d.call is authenticate or _authenticates(d) for d in dependant.dependencies)


# No body of this API nests deeper than a profile document's few levels; a parser
# recursing through thousands of `[` would run out of stack, before any key is checked.
MAX_DEPTH = 64
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_OPENING = frozenset(b"[{")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))


def check_depth(body: bytes) -> None:
    """422 for a body nesting arrays and objects deeper than MAX_DEPTH."""
    if body.count(b"[") + body.count(b"{") <= MAX_DEPTH:
        return  # cannot be that deep: the common case costs two C-speed counts
    brackets = _STRING.sub(b"", body).translate(None, _NOT_BRACKETS)  # outside strings
    steps = (1 if byte in _OPENING else -1 for byte in brackets)
    if max(itertools.accumulate(steps), default=0) > MAX_DEPTH:
        detail = f"the body nests arrays and objects deeper than {MAX_DEPTH} levels"
        raise ProblemError(
            422, "invalid-request", detail, [FieldError(field="(body)", message=detail)]
        )


def is_json(content_type: str) -> bool:
    media_type = content_type.partition(";")[0].strip().lower()
    return media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


def check_types(request: Request, route: APIRoute, body: bytes) -> None:
    """422 naming each value whose JSON type the operation's schema does not allow."""
    try:
        value = json.loads(body)
    except ValueError:
        return  # FastAPI's own parse reports it
    doc = request.app.openapi()
    operation = doc["paths"].get(route.path_format, {}).get(request.method.lower(), {})
    media = operation.get("requestBody", {}).get("content", {}).get("application/json")
    if media is None:
        return  # a route left out of the document: its model alone judges the body
    schema = media["schema"]
    components = doc.get("components", {}).get("schemas", {})
    errors = mismatches(schema, value, "", components)
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        detail = f"{errors[0].field}: {errors[0].message}{more}"
        raise ProblemError(422, "invalid-request", detail, errors)


def mismatches(schema: Schema, value: Any, where: str, components: Schema) -> list[FieldError]:
    """Each place in `value` whose JSON type `schema` refuses (other rules are the
    models' to check)."""
    schema = _resolved(schema, components)
    errors = [
        error
        for part in schema.get("allOf", [])
        for error in mismatches(part, value, where, components)
    ]
    union = schema.get("anyOf") or schema.get("oneOf")
    if union:
        return errors + _union_mismatches(union, value, where, components)
    types = schema.get("type")
    if types is not None:
        allowed = [types] if isinstance(types, str) else list(types)
        if not any(fits(value, t) for t in allowed):
            return [*errors, _wrong_type(where, allowed, value)]
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = properties.get(key, extra if isinstance(extra, dict) else None)
            if sub is not None:
                errors += mismatches(sub, item, f"{where}.{key}" if where else key, components)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            errors += mismatches(schema["items"], item, f"{where}[{index}]", components)
    return errors


def _union_mismatches(
    union: list[Schema], value: Any, where: str, components: Schema
) -> list[FieldError]:
    """None when some branch takes the value; else the errors of the first branch of the
    value's type (and keys), or the types of all branches when none is of its type."""
    branches = [_resolved(branch, components) for branch in union]
    typed = [b for b in branches if _fits_type(b, value, components)]
    if not typed:
        allowed = [t for b in branches for t in _types(b, components)]
        return [_wrong_type(where, allowed, value)] if allowed else []
    keyed = [b for b in typed if _fits_keys(b, value)] or typed
    found = [mismatches(b, value, where, components) for b in keyed]
    return [] if any(not errors for errors in found) else found[0]


def _fits_type(schema: Schema, value: Any, components: Schema) -> bool:
    types = _types(schema, components)
    return not types or any(fits(value, t) for t in types)


def _fits_keys(schema: Schema, value: Any) -> bool:
    """An object branch that forbids other keys is not the one a value with them meant."""
    if isinstance(value, dict) and schema.get("additionalProperties") is False:
        return set(value) <= set(schema.get("properties", {}))
    return True


def _types(schema: Schema, components: Schema) -> list[str]:
    schema = _resolved(schema, components)
    union = schema.get("anyOf") or schema.get("oneOf")
    if union:
        return [t for branch in union for t in _types(branch, components)]
    types = schema.get("type", [])
    return [types] if isinstance(types, str) else list(types)


def _resolved(schema: Schema, components: Schema) -> Schema:
    while "$ref" in schema:
        schema = components[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def fits(value: Any, json_type: str) -> bool:
    if json_type == "integer":  # 2.0 is one too, as JSON Schema counts
        if isinstance(value, float):
            return value.is_integer()
        return isinstance(value, int) and not isinstance(value, bool)
    if json_type == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    expected = {
        "boolean": bool,
        "string": str,
        "null": type(None),
        "array": list,
        "object": dict,
    }.get(json_type)
    return expected is None or isinstance(value, expected)


def _wrong_type(where: str, allowed: list[str], value: Any) -> FieldError:
    names = list(dict.fromkeys(NAMES.get(t, t) for t in allowed))
    expected = " or ".join(names)
    got = next(NAMES[t] for t in NAMES if fits(value, t))
    return FieldError(field=where or "(body)", message=f"expected {expected}, got {got}")
