"""DELETE /v1/scopes/…: erasure over HTTP, for the admin and for a key bound to the scope."""

from __future__ import annotations

from fastapi.testclient import TestClient

from memoryd.client import MemoryClient
from memoryd.settings import Settings
from tests.server.conftest import Keys, bearer


def test_a_scope_is_erased_by_its_own_key_and_by_no_other(
    api: TestClient, keys: Keys, api_settings: Settings
) -> None:
    client = MemoryClient(api_settings, dispatch=False)
    client.remember("bot", "ann", "Lives in Lisbon")
    client.remember("bot", "bob", "Lives in Porto")
    assert api.delete("/v1/scopes/bot/bob", headers=bearer(keys.ann)).status_code == 403
    assert api.delete("/v1/scopes/bot/ann").status_code == 401
    erased = api.delete("/v1/scopes/bot/ann", headers=bearer(keys.ann))
    assert erased.status_code == 200, erased.text
    body = erased.json()
    assert body["rows"]["memories"] == 1 and body["actor"] == "key ann" and body["whole_scope"]
    assert client.list("bot", "ann") == [] and client.list("bot", "bob")
    again = api.delete("/v1/scopes/bot/ann", headers=bearer(keys.admin))
    assert again.status_code == 200 and sum(again.json()["rows"].values()) == 0


def test_one_session_is_erased_with_what_was_learnt_from_it(
    api: TestClient, keys: Keys, api_settings: Settings
) -> None:
    from memoryd.extraction.batch import extract_session
    from memoryd.models.keys import SessionKey

    client = MemoryClient(api_settings, dispatch=False)
    for session, line in (("s1", "I live in Lisbon."), ("s2", "I prefer green tea.")):
        turn = {"agent_id": "bot", "user_id": "ann", "session_id": session, "content": line}
        client.enqueue_turns([{**turn, "role": "user"}])
        client.end_session("bot", "ann", session)
        extract_session(api_settings, SessionKey("bot", "ann", session))
    erased = api.delete("/v1/scopes/bot/ann/sessions/s1", headers=bearer(keys.bot))
    assert erased.status_code == 200 and not erased.json()["whole_scope"]
    assert [m.content for m in client.list("bot", "ann")] == ["Prefers green tea"]


def test_the_shared_scope_is_erased_by_an_admin_only(
    api: TestClient, keys: Keys, api_settings: Settings
) -> None:
    client = MemoryClient(api_settings, dispatch=False)
    client.remember("bot", "*", "House rules: be kind", shared=True)
    refused = api.delete("/v1/scopes/bot/*", headers=bearer(keys.bot))
    assert refused.status_code == 403 and client.list("bot", "*")
    assert api.delete("/v1/scopes/bot/*", headers=bearer(keys.admin)).status_code == 200
    assert client.list("bot", "*") == []
