"""HTTP itself, as clients generated from the OpenAPI document expect it: `Allow` on
405, 415 for a body that is not JSON, JSON types taken strictly."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.server.conftest import Keys, bearer
from tests.server.test_api import assert_problem

RECALL = {"agent_id": "bot", "user_id": "ann", "query": "tea"}


def test_a_wrong_method_is_405_naming_every_method_of_the_path(api: TestClient, keys: Keys) -> None:
    answer = api.request("TRACE", "/v1/memories/bot/ann/1", headers=bearer(keys.bot))
    assert_problem(answer, 405)
    assert answer.headers["allow"] == "DELETE, GET, PATCH"
    answer = api.request("OPTIONS", "/api/v1/memories/user", headers=bearer(keys.ann))
    assert_problem(answer, 405)
    assert answer.headers["allow"] == "GET, PATCH, PUT"
    assert api.put("/v1/turns", headers=bearer(keys.bot)).headers["allow"] == "POST"


def test_a_body_sent_as_anything_but_json_is_415_saying_so(api: TestClient, keys: Keys) -> None:
    body = json.dumps({"agent_id": "bot", "user_id": "ann", "query": "tea"})
    for content_type in ({}, {"Content-Type": "text/plain"}, {"Content-Type": "application/x"}):
        answer = api.post("/v1/recall", content=body, headers={**bearer(keys.bot), **content_type})
        assert "Content-Type: application/json" in assert_problem(answer, 415)["detail"]
    charset = {**bearer(keys.bot), "Content-Type": "application/json; charset=utf-8"}
    assert api.post("/v1/recall", content=body, headers=charset).status_code == 200


DEEP = "[" * 2000 + "]" * 2000  # some 4 KB: once a RecursionError and a 500


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/recall"),
        ("POST", "/v1/turns"),
        ("PUT", "/v1/profiles/bot/ann/user"),
        ("PUT", "/v1/agents/bot/settings"),
    ],
)
def test_a_body_nested_thousands_deep_is_refused_without_a_traceback(
    api: TestClient, keys: Keys, method: str, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    body = DEEP if path != "/v1/recall" else json.dumps({**RECALL, "query": "x"})[:-1]
    body = body if path != "/v1/recall" else f'{body}, "categories": {DEEP}}}'
    as_json = {"Content-Type": "application/json"}
    # Without a key, the body is not even read: the key comes first.
    assert_problem(api.request(method, path, content=body, headers=as_json), 401)
    sent = api.request(method, path, content=body, headers={**as_json, **bearer(keys.admin)})
    assert "deeper than 64 levels" in assert_problem(sent, 422)["detail"]
    assert "Traceback" not in caplog.text and "RecursionError" not in caplog.text


def body_routes(api: TestClient) -> list[tuple[str, str]]:
    """Every API operation that takes a JSON body, with its path's ids filled in."""
    doc = api.get("/openapi.json").json()
    return [
        (method.upper(), re.sub(r"\{[^}]+\}", "x", path))
        for path, operations in doc["paths"].items()
        for method, operation in operations.items()
        if "application/json" in operation.get("requestBody", {}).get("content", {})
    ]


def test_the_key_is_checked_before_the_body_is_read(api: TestClient) -> None:
    """A caller without a live key learns nothing of what a body should hold: malformed,
    mistyped or wrong-shaped, every body route answers 401 alike."""
    routes = body_routes(api)
    assert len(routes) >= 10
    bodies = ["{not json", '{"agent_id": 5, "query": []}', "[[[[1]]]]"]
    as_json = {"Content-Type": "application/json"}
    for method, path in routes:
        for body in bodies:
            sent = api.request(method, path, content=body, headers=as_json)
            assert sent.status_code == 401, (method, path, body, sent.text)
    wrong = {**as_json, **bearer("mk_" + "x" * 43)}  # a few: wrong keys are throttled
    for body in bodies:
        assert api.post("/v1/recall", content=body, headers=wrong).status_code == 401


STRICT: list[tuple[str, str, dict[str, Any], str, str]] = [
    ("POST", "/v1/recall", {**RECALL, "k": True}, "k", "expected an integer or null"),
    ("POST", "/v1/context", {**RECALL, "token_budget": "9"}, "token_budget", "got a string"),
    ("POST", "/v1/memories/bot/ann", {"content": "x", "replaces": False}, "replaces", "boolean"),
    ("PUT", "/v1/agents/bot/settings", {"prefetch_limit": True}, "prefetch_limit", "boolean"),
    ("PUT", "/v1/agents/bot/settings", {"memory_enabled": 1}, "memory_enabled", "an integer"),
    ("PUT", "/v1/agents/bot/settings", {"inject_min_score": "1"}, "inject_min_score", "string"),
    (
        "PATCH",
        "/v1/profiles/bot/ann/user",
        {"content": {"places": [{"name": "Home", "commute_minutes": True}]}},
        "content.places[0].commute_minutes",
        "got a boolean",
    ),
    (
        "PUT",
        "/api/v1/memories/work?agent_id=bot&user_id=ann",
        {"content": {"current_projects": [{"name": "A", "deadline": 20270101}]}},
        "content.current_projects[0].deadline",
        "got an integer",
    ),
]


@pytest.mark.parametrize(("method", "path", "body", "field", "words"), STRICT)
def test_json_types_are_taken_strictly_and_the_problem_names_the_field(
    api: TestClient,
    keys: Keys,
    method: str,
    path: str,
    body: dict[str, Any],
    field: str,
    words: str,
) -> None:
    answer = api.request(method, path, json=body, headers=bearer(keys.bot))
    problem = assert_problem(answer, 422, field)
    assert problem["detail"].startswith(f"{field}: expected ") and words in problem["detail"]


def test_a_whole_number_written_with_a_point_is_still_an_integer(
    api: TestClient, keys: Keys
) -> None:
    answer = api.post("/v1/recall", json={**RECALL, "k": 2.0}, headers=bearer(keys.bot))
    assert answer.status_code == 200, answer.text


def test_a_query_parameter_the_route_does_not_read_is_422_naming_it(
    api: TestClient, keys: Keys
) -> None:
    """?catgory=user answered every category, as if the filter held."""
    auth = bearer(keys.bot)
    misspelt = api.get("/v1/memories/bot/ann", params={"catgory": "user"}, headers=auth)
    assert_problem(misspelt, 422)
    [error] = misspelt.json()["errors"]
    assert error == {
        "field": "catgory",
        "message": "not a query parameter of this route; did you mean category?",
    }
    stray = api.post("/v1/recall", params={"k": "3"}, json=RECALL, headers=auth)
    assert_problem(stray, 422)
    assert stray.json()["errors"][0]["message"].endswith("it takes none")
    listed = api.get("/v1/memories/bot/ann", params={"category": "user"}, headers=auth)
    assert listed.status_code == 200
    keyless = api.get("/v1/memories/bot/ann", params={"catgory": "user"})
    assert_problem(keyless, 401)  # the key first: nothing learnt of the route's parameters


def test_a_body_that_is_not_json_names_the_body_and_where_it_breaks(
    api: TestClient, keys: Keys
) -> None:
    """It named a field "[51]", FastAPI's place for the character, with "JSON decode
    error"."""
    headers = {**bearer(keys.bot), "content-type": "application/json"}
    broken = b'{"agent_id": "bot", "user_id": "ann", "query": "x",}'
    answer = api.post("/v1/recall", content=broken, headers=headers)
    assert_problem(answer, 422)
    assert answer.json()["errors"] == [
        {"field": "(body)", "message": "not valid JSON (at character 51)"}
    ]
