"""Profiles over HTTP: seed 001's paths for the key's own user, the per-scope paths with
version and history, problem JSON naming the field, and the shared scope's rule."""

from __future__ import annotations

from fastapi.testclient import TestClient

from memoryd.settings import Settings
from tests.server.conftest import Keys, bearer, make_key


def test_seed_001_paths_serve_the_keys_own_user(api: TestClient, keys: Keys) -> None:
    ann = bearer(keys.ann)
    both = api.get("/api/v1/memories", headers=ann)
    assert both.status_code == 200
    assert set(both.json()) == {"user_memory", "work_memory"}
    assert both.json()["user_memory"]["people"] == []
    put = api.put(
        "/api/v1/memories/user",
        headers=ann,
        json={"content": {"timezone": "Europe/Lisbon", "interests": ["jazz"]}},
    )
    assert put.status_code == 200 and put.json()["timezone"] == "Europe/Lisbon"
    patch = api.patch(
        "/api/v1/memories/user",
        headers=ann,
        json={"content": {"timezone": None, "avoid_topics": ["politics"]}},
    )
    assert patch.json()["timezone"] is None and patch.json()["interests"] == ["jazz"]
    work = api.patch("/api/v1/memories/work", headers=ann, json={"content": {"expertise": ["Go"]}})
    assert work.json()["expertise"] == ["Go"]
    scoped = api.get("/v1/profiles/bot/ann/user", headers=ann).json()
    assert scoped["version"] == 2 and scoped["field_meta"]["avoid_topics"]["source"] == "api"
    history = api.get("/v1/profiles/bot/ann/user/history", headers=ann).json()
    assert [h["patch"] for h in history][1] == {"timezone": None, "avoid_topics": ["politics"]}


def test_a_bad_document_is_problem_json_naming_the_field(api: TestClient, keys: Keys) -> None:
    bad = api.patch(
        "/api/v1/memories/user", headers=bearer(keys.ann), json={"content": {"timezone": 3}}
    )
    assert bad.status_code == 422
    assert bad.headers["content-type"].startswith("application/problem+json")
    assert bad.json()["errors"][0]["field"] == "content.timezone"
    unknown = api.put(
        "/api/v1/memories/work", headers=bearer(keys.ann), json={"content": {"boss": "x"}}
    )
    assert unknown.status_code == 422 and unknown.json()["errors"][0]["field"] == "content.boss"
    assert api.get("/v1/profiles/bot/ann/user", headers=bearer(keys.ann)).json()["version"] == 0


def test_which_scope_a_key_may_use(api: TestClient, keys: Keys, api_settings: Settings) -> None:
    # A key of one agent but any user must say which user.
    needs = api.get("/api/v1/memories/user", headers=bearer(keys.bot))
    assert needs.status_code == 400 and "agent_id" in needs.json()["detail"]
    ok = api.get("/api/v1/memories/user?agent_id=bot&user_id=bob", headers=bearer(keys.bot))
    assert ok.status_code == 200
    # Ann's key reaches neither Bob's documents nor writes to the shared scope...
    assert api.get("/v1/profiles/bot/bob/user", headers=bearer(keys.ann)).status_code == 403
    shared = {"content": {"team_context": "Support"}}
    assert (
        api.patch("/v1/profiles/bot/*/work", headers=bearer(keys.ann), json=shared).status_code
        == 403
    )
    # ...which she may read, and the agent's key may write.
    assert (
        api.patch("/v1/profiles/bot/*/work", headers=bearer(keys.bot), json=shared).status_code
        == 200
    )
    read = api.get("/v1/profiles/bot/*/work", headers=bearer(keys.ann))
    assert read.json()["content"]["team_context"] == "Support"
    other = make_key(api_settings, "other", agent_ids=["other"])
    assert api.get("/v1/profiles/bot/ann/user", headers=bearer(other)).status_code == 403


def test_a_list_of_time_windows_can_be_emptied(api: TestClient, keys: Keys) -> None:
    """Found by schemathesis: emptying a list whose items have no name was a 500."""
    ann = bearer(keys.ann)
    windows = {"productive_windows": [{"weekdays": ["mon"], "start": "09:00", "end": "12:00"}]}
    put = {"content": {"scheduling_preferences": windows}}
    assert api.put("/v1/profiles/bot/ann/user", headers=ann, json=put).status_code == 200
    emptied = {"content": {"scheduling_preferences": {"productive_windows": []}}}
    patch = api.patch("/v1/profiles/bot/ann/user", headers=ann, json=emptied)
    assert patch.status_code == 200, patch.text
    assert patch.json()["content"]["scheduling_preferences"]["productive_windows"] == []
