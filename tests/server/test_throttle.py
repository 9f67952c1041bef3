"""Guessing keys is slowed down: past MEMORYD_AUTH_FAILURE_LIMIT wrong keys a minute from
one address, the API and the page's sign-in answer 429 with Retry-After."""

from __future__ import annotations

from fastapi.testclient import TestClient

from memoryd.server.app import create_app
from memoryd.settings import Settings
from tests.server.conftest import Keys, bearer

RECALL = {"agent_id": "bot", "user_id": "ann", "query": "tea"}


def test_wrong_keys_past_the_limit_are_answered_429(api_settings: Settings, keys: Keys) -> None:
    limited = api_settings.updated(**{"auth_failure_limit": 3})
    with TestClient(create_app(limited)) as api:
        for _ in range(3):
            wrong = api.post("/v1/recall", json=RECALL, headers=bearer("mk_wrong"))
            assert wrong.status_code == 401
        refused = api.post("/v1/recall", json=RECALL, headers=bearer(keys.bot))
        assert refused.status_code == 429 and 1 <= int(refused.headers["retry-after"]) <= 60
        assert "too many wrong keys" in refused.json()["detail"]
        page = api.post("/login", data={"key": keys.admin}, follow_redirects=False)
        assert page.status_code == 429 and "Too many wrong keys" in page.text
    # Another process, or the same after a minute, starts afresh; calls without a key
    # and right keys are never counted.
    with TestClient(create_app(limited)) as api:
        for _ in range(5):
            assert api.post("/v1/recall", json=RECALL).status_code == 401
            assert api.post("/v1/recall", json=RECALL, headers=bearer(keys.bot)).status_code == 200
        for _ in range(3):
            assert api.post("/login", data={"key": "nope"}).status_code == 401
        assert api.post("/v1/recall", json=RECALL, headers=bearer(keys.bot)).status_code == 429


def test_no_limit_when_set_to_zero(api_settings: Settings) -> None:
    free = api_settings.updated(**{"auth_failure_limit": 0})
    with TestClient(create_app(free)) as api:
        for _ in range(30):
            wrong = api.post("/v1/recall", json=RECALL, headers=bearer("mk_wrong"))
            assert wrong.status_code == 401
