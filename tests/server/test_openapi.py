"""The served OpenAPI document tells a generated client everything: each profile
type's fields, and every error an operation answers, as problem JSON."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from memoryd.models.profiles import CONTENT_MODELS, ProfileType
from tests.server.conftest import Keys, bearer
from tests.server.test_api import assert_problem

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
