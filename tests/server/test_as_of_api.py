"""As-of reads over HTTP: recall, the context block and the list take `as_of`."""

from __future__ import annotations

from fastapi.testclient import TestClient

from memoryd.client import MemoryClient
from memoryd.settings import Settings
from tests.recall.test_as_of import WHERE, on, said_over_months
from tests.server.conftest import Keys, bearer


def test_as_of_over_http(api: TestClient, keys: Keys, api_settings: Settings) -> None:
    said_over_months(MemoryClient(api_settings, dispatch=False))
    auth = bearer(keys.ann)
    asked = {"agent_id": "bot", "user_id": "ann", "query": WHERE}
    march = on(3).isoformat()
    recalled = api.post("/v1/recall", json={**asked, "as_of": march}, headers=auth)
    assert [m["content"] for m in recalled.json()["memories"]] == ["Lives in Lisbon"]
    block = api.post("/v1/context", json={**asked, "as_of": march}, headers=auth).json()
    assert "Lives in Lisbon" in block["context"]
    listed = api.get("/v1/memories/bot/ann", params={"as_of": march}, headers=auth).json()
    assert [m["content"] for m in listed["memories"]] == ["Lives in Lisbon", "Has a cat called Tom"]
    naive = api.post("/v1/recall", json={**asked, "as_of": "2026-04-20T00:00:00"}, headers=auth)
    assert naive.status_code == 422 and "as_of" in naive.text
    seconds = api.get("/v1/memories/bot/ann", params={"as_of": "0.5"}, headers=auth)
    assert seconds.status_code == 422 and "ISO 8601" in seconds.text
    # Valid ISO 8601 whose UTC time leaves the calendar: a 500 from the database before.
    for edge in ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-12:00"):
        beyond = api.post("/v1/context", json={**asked, "as_of": edge}, headers=auth)
        assert beyond.status_code == 422 and "as_of" in beyond.text, beyond.text
        assert "years 1 to 9999" in beyond.text
        listed_beyond = api.get("/v1/memories/bot/ann", params={"as_of": edge}, headers=auth)
        assert listed_beyond.status_code == 422 and "years 1 to 9999" in listed_beyond.text
    then = {"as_of": march, "status": "superseded"}
    retired = api.get("/v1/memories/bot/ann", params=then, headers=auth).json()
    assert [(m["content"], m["status"]) for m in retired["memories"]] == [
        ("Lives in Berlin", "superseded")
    ]
