"""A history is read a page at a time: a memory confirmed every day for three years
gathers an event a day, and a profile a version per change. The API, the Python client,
the page and the command line each reach every entry, once, oldest first."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect
from sqlalchemy import insert, select

from memoryd.client import MemoryClient
from memoryd.models.db import session_scope, utcnow
from memoryd.models.schemas import MAX_PAGE
from memoryd.models.tables import Actor, EventKind, MemoryEvent, Profile, ProfileEvent
from memoryd.server.schemas import MAX_ID
from memoryd.settings import Settings
from tests.server.conftest import Keys, bearer, sign_in
from tests.server.test_api import assert_problem

CONFIRMATIONS = 1100  # three years of a fact said again each day


def confirmed_daily(settings: Settings) -> int:
    """A memory and its history: created, then confirmed once a day."""
    memory = MemoryClient(settings, dispatch=False).remember("bot", "ann", "Drinks green tea")
    start = utcnow() - timedelta(days=CONFIRMATIONS)
    rows = [
        {
            "memory_id": memory.id,
            "agent_id": "bot",
            "user_id": "ann",
            "kind": EventKind.CONFIRMED,
            "actor": Actor.EXTRACTOR,
            "after_content": "Drinks green tea",
            "created_at": start + timedelta(days=day),
        }
        for day in range(CONFIRMATIONS)
    ]
    with session_scope(settings.storage) as session:
        session.execute(insert(MemoryEvent), rows)
    return memory.id


def changed_often(settings: Settings, versions: int) -> None:
    """ann's user profile at `versions`: set once, then a time zone per version."""
    MemoryClient(settings).patch_profile("bot", "ann", "user", {"timezone": "UTC"})
    rows = [
        {"agent_id": "bot", "user_id": "ann", "version": version, "actor": Actor.API,
         "patch": {"timezone": f"Etc/GMT+{version % 12}"}, "meta_patch": {},
         "created_at": utcnow()}
        for version in range(2, versions + 1)
    ]  # fmt: skip
    with session_scope(settings.storage) as session:
        profile = session.scalars(select(Profile).where(Profile.type == "user")).one()
        session.execute(insert(ProfileEvent), [{**r, "profile_id": profile.id} for r in rows])
        profile.version = versions


def test_a_long_history_comes_a_page_at_a_time_every_entry_once(
    api: TestClient, keys: Keys, api_settings: Settings
) -> None:
    memory_id = confirmed_daily(api_settings)
    url, auth = f"/v1/memories/bot/ann/{memory_id}/history", bearer(keys.ann)
    pages, after = [], 0
    for _ in range(4):  # a cursor ignored would serve page one for ever
        page = api.get(url, params={"after": after}, headers=auth).json()
        pages.append(len(page))
        if len(page) < MAX_PAGE:
            break
        after = page[-1]["id"]
        assert page[0]["id"] > 0 and [e["id"] for e in page] == sorted(e["id"] for e in page)
    assert pages == [500, 500, 101]  # created, then 1,100 confirmations
    assert [e["kind"] for e in api.get(url, params={"limit": 2}, headers=auth).json()] == [
        "created",
        "confirmed",
    ]
    # The Python client pages the same way.
    client = MemoryClient(api_settings, dispatch=False)
    first = client.history("bot", "ann", memory_id)
    rest = client.history("bot", "ann", memory_id, after=first[-1].id, limit=MAX_PAGE)
    assert len(first) == MAX_PAGE and len({e.id for e in first + rest}) == MAX_PAGE * 2
    for limit in (0, MAX_PAGE + 1):  # never fewer than asked without a word
        with pytest.raises(ValueError, match="limit"):
            client.history("bot", "ann", memory_id, limit=limit)
        with pytest.raises(ValueError, match="limit"):
            client.profile_history("bot", "ann", "user", limit=limit)
    for query, field in [("after=-1", "after"), (f"after={MAX_ID + 1}", "after"),
                         ("limit=0", "limit"), (f"limit={MAX_PAGE + 1}", "limit")]:  # fmt: skip
        assert_problem(api.get(f"{url}?{query}", headers=auth), 422, field)


def test_a_profiles_history_pages_by_version(api: TestClient, keys: Keys) -> None:
    auth = bearer(keys.ann)
    for zone in ("Europe/Lisbon", "Europe/Berlin", "Asia/Tokyo"):
        changed = api.patch(
            "/v1/profiles/bot/ann/user", headers=auth, json={"content": {"timezone": zone}}
        )
        assert changed.status_code == 200, changed.text
    url = "/v1/profiles/bot/ann/user/history"
    first = api.get(url, params={"limit": 2}, headers=auth).json()
    assert [e["version"] for e in first] == [1, 2]
    rest = api.get(url, params={"after": 2}, headers=auth).json()
    assert [e["patch"] for e in rest] == [{"timezone": "Asia/Tokyo"}]
    assert api.get(url, params={"after": 3}, headers=auth).json() == []
    # Past the largest version (32-bit), up to the largest id a query takes: nothing.
    assert api.get(url, params={"after": MAX_ID}, headers=auth).json() == []


def test_the_page_shows_a_long_history_a_page_at_a_time(
    api: TestClient, keys: Keys, api_settings: Settings
) -> None:
    memory_id = confirmed_daily(api_settings)
    sign_in(api, keys.admin)
    shown, url = [], f"/memories/{memory_id}/history?lang=en"
    for _ in range(4):
        html = api.get(url).text
        shown.append(html.count("<li "))
        later = re.search(r'hx-get="(/memories/\d+/history\?after=\d+)"', html)
        if later is None:
            break
        assert "Later entries" in html
        url = later.group(1)
    assert shown == [500, 500, 101]


def test_later_entries_open_below_in_the_browser(page: Page, api_settings: Settings) -> None:
    memory_id = confirmed_daily(api_settings)
    page.reload()
    card = page.locator(f"#memory-{memory_id}")
    card.get_by_role("button", name="History").click()
    entries = page.locator(f"#history-{memory_id} li")
    expect(entries).to_have_count(500)
    for shown in (1000, CONFIRMATIONS + 1):
        page.locator(f"#history-{memory_id}").get_by_role("button", name="Later entries").click()
        expect(entries).to_have_count(shown)
    expect(page.get_by_role("button", name="Later entries")).to_have_count(0)
