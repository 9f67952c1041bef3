"""Write receipts over HTTP: `GET /v1/turns/{agent_id}/{user_id}/{turn_key}` and its
`wait`."""

from __future__ import annotations

from fastapi.testclient import TestClient

from memoryd.extraction.batch import extract_session
from memoryd.models.keys import SessionKey
from memoryd.settings import Settings
from tests.server.conftest import Keys, bearer


def test_http_status_and_wait(api: TestClient, keys: Keys, api_settings: Settings) -> None:
    auth = bearer(keys.ann)
    item = {"agent_id": "bot", "user_id": "ann", "session_id": "s1", "role": "user"}
    turn = {**item, "content": "I prefer rooibos.", "turn_key": "web/42"}
    assert api.post("/v1/turns", json=turn, headers=auth).status_code == 202
    got = api.get("/v1/turns/bot/ann/web/42", headers=auth)
    assert got.status_code == 200 and got.json()["status"] == "pending"
    assert got.json()["turn_key"] == "web/42"  # a key with "/" is still one key
    assert api.post("/v1/sessions/bot/ann/s1/end", headers=auth).status_code == 200
    extract_session(api_settings, SessionKey("bot", "ann", "s1"))
    done = api.get("/v1/turns/bot/ann/web/42", params={"wait": 5}, headers=auth).json()
    assert done["status"] == "done" and len(done["memory_ids"]) == 1
    missing = api.get("/v1/turns/bot/ann/nope", headers=auth)
    assert missing.status_code == 404 and "nope" in missing.json()["detail"]
    assert api.get("/v1/turns/bot/ann/web/42", params={"wait": 31}, headers=auth).status_code == 422
    assert api.get("/v1/turns/bot/bob/web/42", headers=auth).status_code == 403
