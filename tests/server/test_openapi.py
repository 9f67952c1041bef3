"""The served OpenAPI document tells a generated client everything: each profile
type's fields, and every error an operation answers, as problem JSON."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel, ValidationError

from memoryd.models.profiles import CONTENT_MODELS, Person, ProfileType, UserMemoryContent
from memoryd.models.schemas import TurnIn
from memoryd.server.schemas import MemoryCreate, RecallRequest
from tests.server.conftest import Keys, bearer
from tests.server.test_api import assert_problem

RECALL = {"agent_id": "bot", "user_id": "ann", "query": "tea"}
ZONES = ["Europe/Lisbon", "Etc/GMT+5", "UTC+8", "UTC-03:30", "UTC+15", "Mars/Olympus", ""]

Doc = dict[str, Any]


@pytest.fixture
def doc(api: TestClient) -> Doc:
    answer = api.get("/openapi.json")
    assert answer.status_code == 200
    document: Doc = answer.json()
    return document


def resolved(doc: Doc, schema: Doc) -> Doc:
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def body(doc: Doc, path: str, method: str) -> Doc:
    media = doc["paths"][path][method]["requestBody"]["content"]["application/json"]
    return resolved(doc, media["schema"])


def answer(doc: Doc, path: str, method: str) -> Doc:
    media = doc["paths"][path][method]["responses"]["200"]["content"]["application/json"]
    return resolved(doc, media["schema"])


def content_fields(doc: Doc, schema: Doc) -> set[str]:
    return set(resolved(doc, schema["properties"]["content"])["properties"])


@pytest.mark.parametrize("kind", list(ProfileType))
def test_each_profile_type_is_typed_field_by_field(doc: Doc, kind: ProfileType) -> None:
    fields = set(CONTENT_MODELS[kind].model_fields)
    scoped = f"/v1/profiles/{{agent_id}}/{{user_id}}/{kind.value}"
    seed = f"/api/v1/memories/{kind.value}"
    for method in ("get", "put", "patch"):
        out = answer(doc, scoped, method)
        assert out["properties"]["type"]["const"] == kind.value
        assert content_fields(doc, out) == fields
        assert set(answer(doc, seed, method)["properties"]) == fields
    for path in (scoped, seed):
        assert content_fields(doc, body(doc, path, "put")) == fields
        patch = resolved(doc, body(doc, path, "patch")["properties"]["content"])
        assert set(patch["properties"]) == fields
        assert all(  # a merge patch: null removes a field
            {"type": "null"} in value.get("anyOf", []) for value in patch["properties"].values()
        )
    people = "people" if kind == ProfileType.USER else "team_members"
    item = resolved(doc, answer(doc, seed, "get")["properties"][people]["items"])
    assert {"name", "role", "meta"} <= set(item["properties"])


def test_a_path_naming_no_profile_type_is_still_refused_naming_kind(
    api: TestClient, keys: Keys
) -> None:
    assert_problem(api.get("/v1/profiles/bot/ann/hobby", headers=bearer(keys.bot)), 422, "kind")
    assert_problem(api.get("/v1/profiles/bot/ann/hobby"), 401)


def test_every_operation_documents_its_errors_as_problems(doc: Doc) -> None:
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            expected = {"405", "422"}
            if path != "/v1/health":
                expected |= {"401", "403", "503"}
            if "{" in path:
                expected.add("404")
            if "requestBody" in operation:
                expected |= {"400", "413", "415"}
            assert expected <= set(responses), (method, path)
            for status, response in responses.items():
                if status.startswith("2") or (path, status) == ("/v1/health", "503"):
                    continue
                media = response["content"]["application/problem+json"]["schema"]
                assert media == {"$ref": "#/components/schemas/Problem"}
            assert responses["405"]["headers"]["Allow"]["required"] is True
    seed = doc["paths"]["/api/v1/memories/user"]["get"]["responses"]
    assert "agent_id" in seed["400"]["description"]
    restore = "/v1/memories/{agent_id}/{user_id}/{memory_id}/restore"
    assert "409" in doc["paths"][restore]["post"]["responses"]


def accepts(doc: Doc, schema: Doc, value: str | None) -> bool:
    """What the document says of a string (or null): the keywords memoryd's use."""
    schema = resolved(doc, schema)
    if value is None:
        return "anyOf" in schema and any(accepts(doc, b, None) for b in schema["anyOf"])
    patterns = [schema.get("pattern"), *(p.get("pattern") for p in schema.get("allOf", []))]
    return (
        schema.get("type", "string") == "string"
        and schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value))
        and all(re.search(p, value) for p in patterns if p)
        and value != schema.get("not", {}).get("const")
        and ("anyOf" not in schema or any(accepts(doc, b, value) for b in schema["anyOf"]))
    )


def taken(model: type[BaseModel], field: str, value: str, **others: Any) -> bool:
    try:
        model.model_validate({**others, field: value})
    except ValidationError:
        return False
    return True


TURN = {"agent_id": "bot", "user_id": "ann", "session_id": "s", "role": "user", "content": "hi"}
# (component, field, the model that validates it, other fields it needs, values)
AGREEMENT: list[tuple[str, str, type[BaseModel], dict[str, Any], list[str]]] = [
    ("Person", "name", Person, {}, ["Ann", " Ann ", " ", "", "a\x00b", "\x85", "\u3000", "\ufeff"]),
    ("Person", "notes", Person, {"name": "A"}, ["", "  ", "ok", "a\x00"]),
    ("UserMemoryContent", "timezone", UserMemoryContent, {}, ZONES),
    ("UserMemoryContent", "primary_language", UserMemoryContent, {}, ["en", "pt-BR", "e", "x y"]),
    ("TurnIn", "user_id", TurnIn, TURN, ["ann", " ann", "*", " ", "a\x01"]),
    ("TurnIn", "content", TurnIn, TURN, ["hi", " hi", " \n ", "a\x00", "\x1f\x85"]),
    ("TurnIn", "timestamp", TurnIn, TURN, ["2026-01-02T03:04:05Z", "1999-12-31T23:00:00Z"]),
    ("MemoryCreate", "content", MemoryCreate, {}, ["Likes tea", " ", "a\x00b"]),
    ("RecallRequest", "query", RecallRequest, RECALL, ["", " ", "tea", "a\x00"]),
]


@pytest.mark.parametrize(("component", "field", "model", "others", "values"), AGREEMENT)
def test_the_document_takes_a_string_exactly_when_the_server_does(
    doc: Doc,
    component: str,
    field: str,
    model: type[BaseModel],
    others: dict[str, Any],
    values: list[str],
) -> None:
    """Values a client builds from the document are taken; values it refuses are not:
    pydantic documents lengths and patterns, not what validators after them refuse."""
    schema = doc["components"]["schemas"][component]["properties"][field]
    for value in values:
        assert accepts(doc, schema, value) == taken(model, field, value, **others), value
