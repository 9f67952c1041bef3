"""Memory writes over HTTP and the page: one truth per memory (issue 21, item 2)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from memoryd.client import MemoryClient
from memoryd.settings import Settings
from tests.server.conftest import Keys, bearer, sign_in


def test_a_patch_of_the_content_drops_the_copied_title_and_an_empty_patch_writes_nothing(
    api: TestClient, keys: Keys
) -> None:
    auth = bearer(keys.ann)
    created = api.post(
        "/v1/memories/bot/ann", json={"content": "Vegetarian since 2020"}, headers=auth
    )
    base = f"/v1/memories/bot/ann/{created.json()['id']}"
    edited = api.patch(base, json={"content": "Vegan since 2024"}, headers=auth).json()
    assert (edited["name"], edited["content"]) == ("", "Vegan since 2024")
    context = api.post(
        "/v1/context",
        json={"agent_id": "bot", "user_id": "ann", "query": "vegan vegetarian"},
        headers=auth,
    ).json()["context"]
    assert "Vegan since 2024" in context and "Vegetarian" not in context
    for body in ({}, {"content": "Vegan since 2024", "name": ""}):
        same = api.patch(base, json=body, headers=auth)
        assert same.status_code == 200 and same.json()["updated_at"] == edited["updated_at"]
    kinds = [e["kind"] for e in api.get(f"{base}/history", headers=auth).json()]
    assert kinds == ["created", "updated"]


def test_the_page_edit_drops_the_copied_title_and_saving_it_unchanged_writes_nothing(
    api: TestClient, keys: Keys, api_settings: Settings
) -> None:
    client = MemoryClient(api_settings, dispatch=False)
    memory = client.remember("bot", "ann", "Vegetarian since 2020", tags=["food"])
    sign_in(api, keys.admin)
    form = {"name": memory.name, "category": "user", "tags": "food"}  # as the form shows them
    saved = api.post(f"/memories/{memory.id}/edit", data={**form, "content": "Vegan since 2024"})
    assert saved.status_code == 200, saved.text
    assert "Vegetarian" not in saved.text
    assert client.get("bot", "ann", memory.id).name == ""
    again = {"name": "", "category": "user", "tags": "food", "content": "Vegan since 2024"}
    assert api.post(f"/memories/{memory.id}/edit", data=again).status_code == 200
    assert [e.kind for e in client.history("bot", "ann", memory.id)] == ["created", "updated"]


def test_blank_content_is_a_problem_naming_the_field_over_http_and_on_the_page(
    api: TestClient, keys: Keys, api_settings: Settings
) -> None:
    auth = bearer(keys.ann)
    memory = api.post("/v1/memories/bot/ann", json={"content": "Prefers tea"}, headers=auth).json()
    for response in (
        api.post("/v1/memories/bot/ann", json={"content": "   "}, headers=auth),
        api.patch(f"/v1/memories/bot/ann/{memory['id']}", json={"content": " \n"}, headers=auth),
    ):
        assert response.status_code == 422, response.text
        assert response.json()["errors"] == [{"field": "content", "message": "content is blank"}]
    sign_in(api, keys.admin)
    page = api.post(f"/memories/{memory['id']}/edit", data={"content": "   ", "category": "user"})
    assert page.status_code == 422 and "content: content is blank" in page.text
    client = MemoryClient(api_settings, dispatch=False)
    assert [m.content for m in client.list("bot", "ann")] == ["Prefers tea"]


def test_saving_an_existing_memory_answers_200_with_it(api: TestClient, keys: Keys) -> None:
    auth = bearer(keys.ann)
    created = api.post(
        "/v1/memories/bot/ann", json={"content": "Allergic to peanuts"}, headers=auth
    )
    again = api.post("/v1/memories/bot/ann", json={"content": "allergic to peanuts"}, headers=auth)
    assert (created.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == created.json()["id"]
    assert (again.json()["evidence_count"], again.json()["confidence"]) == (2, 1.0)
