"""HTTP itself, as clients generated from the OpenAPI document expect it: `Allow` on
405, 415 for a body that is not JSON, JSON types taken strictly."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.server.conftest import Keys, bearer
from tests.server.test_api import assert_problem


def test_a_wrong_method_is_405_naming_every_method_of_the_path(api: TestClient, keys: Keys) -> None:
    answer = api.request("TRACE", "/v1/memories/bot/ann/1", headers=bearer(keys.bot))
    assert_problem(answer, 405)
    assert answer.headers["allow"] == "DELETE, GET, PATCH"
    answer = api.request("OPTIONS", "/api/v1/memories/user", headers=bearer(keys.ann))
    assert_problem(answer, 405)
    assert answer.headers["allow"] == "GET, PATCH, PUT"
    assert api.put("/v1/turns", headers=bearer(keys.bot)).headers["allow"] == "POST"
