"""The memory page in a real Chromium (Debian's package, never a downloaded browser):
sign in, search, edit, delete and restore, resolve a conflict, approve a review item,
switch to Chinese; the health panel's screenshot is saved for README."""

from __future__ import annotations

import copy
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, expect
from sqlalchemy import select, update

from memoryd.client import MemoryClient
from memoryd.models.db import session_scope, utcnow
from memoryd.models.tables import MemoryStatus, Tier, Turn, TurnStatus
from memoryd.settings import Settings
from tests.factories import add_turns, make_memory
from tests.server.conftest import LiveServer, bearer, make_key

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def seed(settings: Settings) -> dict[str, int]:
    client = MemoryClient(settings, dispatch=False)
    lisbon = client.remember("bot", "ann", "Lives in Lisbon", tags=["home"])
    porto = client.remember("bot", "ann", "Lives in Porto", replaces=lisbon.id)
    tea = client.remember("bot", "ann", "Prefers green tea", category="user")
    with session_scope(settings.storage) as session:
        jazz = make_memory(session, settings, "Maybe likes jazz", confidence=0.65).id
    return {"lisbon": lisbon.id, "porto": porto.id, "tea": tea.id, "jazz": jazz}


def test_the_page_searches_edits_deletes_restores_resolves_and_approves(
    page: Page, api_settings: Settings
) -> None:
    ids = seed(api_settings)
    client = MemoryClient(api_settings, dispatch=False)
    page.reload()
    panel = page.locator("#health-panel")
    expect(panel.locator("[data-stat=memories] b")).to_have_text("3")
    expect(panel.locator("[data-stat=conflicts] b")).to_have_text("1")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(
        path=str(ARTIFACTS / f"page-{api_settings.storage.resolved_database_url[:6]}.png")
    )
    panel.screenshot(path=str(ARTIFACTS / "health-panel.png"))

    # Search
    page.fill("input[name=q]", "tea")
    page.click("form[role=search] button[type=submit]")
    expect(page.locator("article.card")).to_have_count(1)
    card = page.locator(f"#memory-{ids['tea']}")
    expect(card.locator(".content")).to_have_text("Prefers green tea")

    # Edit
    card.get_by_role("button", name="Edit").click()
    page.fill(f"#memory-{ids['tea']} textarea[name=content]", "Prefers black tea")
    page.click(f"#memory-{ids['tea']} button[type=submit]")
    expect(page.locator(f"#memory-{ids['tea']} .content")).to_have_text("Prefers black tea")
    assert client.get("bot", "ann", ids["tea"]).content == "Prefers black tea"

    # Delete (after confirming), then restore
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator(f"#memory-{ids['tea']}").get_by_role("button", name="Delete").click()
    expect(page.locator(f"#memory-{ids['tea']} .status")).to_have_text("deleted")
    assert client.get("bot", "ann", ids["tea"]).status == MemoryStatus.DELETED
    page.locator(f"#memory-{ids['tea']}").get_by_role("button", name="Restore").click()
    expect(page.locator(f"#memory-{ids['tea']} .status")).to_have_count(0)
    assert client.get("bot", "ann", ids["tea"]).status == MemoryStatus.ACTIVE

    # History
    page.locator(f"#memory-{ids['tea']}").get_by_role("button", name="History").click()
    expect(page.locator(f"#history-{ids['tea']} li")).to_have_count(4)

    # Resolve a conflict: keep the old version
    page.click("nav >> text=Conflicts")
    conflict = page.locator(f"#conflict-{ids['lisbon']}")
    expect(conflict.locator(".side-old .content")).to_have_text("Lives in Lisbon")
    expect(conflict.locator(".side-new .content")).to_have_text("Lives in Porto")
    conflict.get_by_role("button", name="Keep this (old)").click()
    expect(page.locator(".message")).to_have_text("Resolved.")
    assert client.get("bot", "ann", ids["lisbon"]).status == MemoryStatus.ACTIVE
    assert client.get("bot", "ann", ids["porto"]).status == MemoryStatus.SUPERSEDED

    # Approve a review item
    page.click("nav >> text=Review")
    page.locator(f"#review-{ids['jazz']}").get_by_role("button", name="Approve").click()
    expect(page.locator(".message")).to_have_text("Done.")
    assert client.get("bot", "ann", ids["jazz"]).tier == Tier.LONG

    # In Chinese
    page.goto("/?lang=zh")
    expect(page.locator("[data-stat=memories] span")).to_have_text("总记忆条数")
    page.goto("/review")  # the choice is remembered
    expect(page.locator("h1")).to_have_text("低置信度短期记忆")


def test_a_bad_edit_shows_the_field_and_changes_nothing(page: Page, api_settings: Settings) -> None:
    tea = MemoryClient(api_settings, dispatch=False).remember("bot", "ann", "Prefers tea")
    page.reload()
    page.locator(f"#memory-{tea.id}").get_by_role("button", name="Edit").click()
    page.fill(f"#memory-{tea.id} textarea[name=content]", "x" * 5000)
    page.click(f"#memory-{tea.id} button[type=submit]")
    expect(page.locator(f"#memory-{tea.id} .message.error")).to_contain_text("content")
    client = MemoryClient(api_settings, dispatch=False)
    assert client.get("bot", "ann", tea.id).content == "Prefers tea"


def test_dead_letters_are_skipped_or_deleted_from_the_batches_page(
    page: Page, api_settings: Settings
) -> None:
    add_turns(api_settings, 2, user_id="ann")
    add_turns(api_settings, 1, start=2, user_id="bob", session_id="s2")
    with session_scope(api_settings.storage) as session:
        session.execute(update(Turn).values(status=TurnStatus.FAILED))
    page.on("dialog", lambda dialog: dialog.accept())  # each asks for confirmation first
    page.goto("/batches")
    rows = page.locator("table.dead tbody tr")
    expect(rows).to_have_count(3)
    rows.filter(has_text="bot/ann/").first.get_by_role("button", name="Skip").click()
    expect(page.locator("#retry-result")).to_contain_text("turns skipped")
    page.reload()
    expect(rows).to_have_count(1)
    rows.first.get_by_role("button", name="Delete").click()
    expect(page.locator("#retry-result")).to_contain_text("turns deleted 1")
    with session_scope(api_settings.storage, readonly=True) as session:
        left = session.execute(select(Turn.user_id, Turn.status)).all()
    assert sorted(tuple(row) for row in left) == [("ann", "skipped"), ("ann", "skipped")]


def test_the_profiles_panel_shows_and_edits_both_documents(
    page: Page, api_settings: Settings
) -> None:
    client = MemoryClient(api_settings, dispatch=False)
    client.patch_profile("bot", "ann", "user", {"timezone": "Europe/Lisbon"})
    client.patch_profile(
        "bot", "ann", "user", {"people": [{"name": "Rui", "meta": {"source": "extractor"}}]}
    )
    page.click("nav >> text=Profiles")
    page.fill("input[name=agent]", "bot")
    page.fill("input[name=user]", "ann")
    page.click("form.filters button[type=submit]")
    user = page.locator("#profile-user")
    expect(user.locator("pre.prompt")).to_contain_text("Timezone: Europe/Lisbon")
    # meta is shown, read-only: no field edits it.
    rui = user.locator("fieldset.record", has=page.locator("input[value='Rui']"))
    expect(rui.locator(".meta-readonly")).to_contain_text("source extractor")
    expect(user.locator("[name$='.meta']")).to_have_count(0)
    # A bad value is refused, naming the field; the document is unchanged.
    user.locator("[name='s:timezone']").fill("Mars/Olympus")
    user.locator("button[type=submit]").click()
    expect(page.locator("#profile-user .error")).to_contain_text("timezone")
    expect(page.locator("#profile-user [name='s:timezone']")).to_have_value("Mars/Olympus")
    user = page.locator("#profile-user")
    user.locator("[name='s:timezone']").fill("Asia/Tokyo")
    user.locator("[name='s:occupation']").fill("nurse")
    user.locator("[name='l:interests']").fill("chess\n\n  sailing ")
    user.locator("button[type=submit]").click()
    expect(page.locator("#profile-user pre.prompt")).to_contain_text("Occupation: nurse")
    expect(page.locator("#profile-user h2 small")).to_contain_text("v3")
    profile = client.profile("bot", "ann", "user")
    assert (profile.content["timezone"], profile.content["occupation"]) == ("Asia/Tokyo", "nurse")
    assert profile.content["interests"] == ["chess", "sailing"]
    assert profile.content["people"][0]["meta"]["source"] == "extractor"  # kept as stored
    expect(page.locator("#profile-work pre.prompt")).to_contain_text("nothing known yet")


def test_records_are_edited_added_and_removed_as_fieldsets(
    page: Page, api_settings: Settings
) -> None:
    client = MemoryClient(api_settings, dispatch=False)
    rui = {"name": "Rui", "relationship": "brother", "meta": {"source": "extractor"}}
    ana = {"name": "Ana", "meta": {"source": "extractor", "confidence": 0.6}}
    client.patch_profile("bot", "ann", "user", {"people": [rui, ana]})
    stored_meta = client.profile("bot", "ann", "user").content["people"][0]["meta"]
    page.goto("/profiles?agent=bot&user=ann")
    user = page.locator("#profile-user")
    expect(user.locator("[name='r:people[1].name']")).to_have_value("Ana")
    user.locator("[name='r:people[0].relationship']").fill("cousin")
    user.locator("[name='x:people[1]']").check()
    user.locator("[name='r:people[new].name']").fill("Lia")
    user.locator("[name='r:people[new].role']").fill("doctor")
    user.locator("[name='r:places[new].name']").fill("Home")
    user.locator("[name='r:places[new].commute_minutes']").fill("15")
    user.locator("[name='r:places[new].timezone']").fill("Mars/Olympus")
    user.locator("button[type=submit]").click()
    # Refused naming the record's field; everything typed is still there.
    error = page.locator("#profile-user .error")
    expect(error).to_contain_text("places[0].timezone")
    user = page.locator("#profile-user")
    expect(user.locator("[name='r:people[0].relationship']")).to_have_value("cousin")
    expect(user.locator("[name='x:people[1]']")).to_be_checked()
    expect(user.locator("[name='r:people[new].name']")).to_have_value("Lia")
    expect(user.locator("[name='r:places[new].commute_minutes']")).to_have_value("15")
    expect(user.locator("[name='r:places[new].timezone']")).to_have_value("Mars/Olympus")
    assert client.profile("bot", "ann", "user").content["people"][0]["relationship"] == "brother"
    user.locator("[name='r:places[new].timezone']").fill("")
    user.locator("button[type=submit]").click()
    expect(page.locator("#profile-user .ok")).to_be_visible()
    content = client.profile("bot", "ann", "user").content
    assert [(p["name"], p["relationship"], p["role"]) for p in content["people"]] == [
        ("Rui", "cousin", None),
        ("Lia", None, "doctor"),
    ]
    assert content["people"][0]["meta"] == stored_meta  # read-only: kept as stored
    assert content["people"][1]["meta"]["source"] == "api"
    assert [(p["name"], p["commute_minutes"]) for p in content["places"]] == [("Home", 15)]
    expect(page.locator("#profile-user [name='r:places[0].name']")).to_have_value("Home")
    # A list of records inside an object: the work profile's time windows.
    work = page.locator("#profile-work")
    field = "[name='r:work_habits.available_hours[new].{}']"
    for day in ("mon", "tue"):
        work.locator(field.format("weekdays") + f"[value={day}]").check()
    work.locator(field.format("start")).fill("09:00")
    work.locator(field.format("end")).fill("17:00")
    work.locator("button[type=submit]").click()
    expect(page.locator("#profile-work .ok")).to_be_visible()
    hours = client.profile("bot", "ann", "work").content["work_habits"]["available_hours"]
    assert hours == [{"weekdays": ["mon", "tue"], "start": "09:00", "end": "17:00"}]


ROUTINE = {
    "name": "gym",
    "cadence": "weekly",
    "time_windows": [{"weekdays": ["mon", "wed"], "start": "07:00", "end": "08:00"}],
}
PROJECT = {
    "name": "Atlas",
    "status": "active",
    "key_milestones": [{"name": "Alpha", "due_date": "2026-01-15"}, {"name": "Beta"}],
}
USER_DOC = {"timezone": "Europe/Lisbon", "interests": ["chess"], "recurring_routines": [ROUTINE]}


def test_records_inside_records_are_fieldsets_too(
    page: Page, api_settings: Settings, live: LiveServer
) -> None:
    """A routine's time windows and a project's milestones: edited, added and removed as
    fieldsets inside their record, and nothing else of either document changes. Dates,
    numbers, clock times and choices are the browser's own inputs, and what they send is
    stored as the API stores it."""
    key = bearer(make_key(api_settings, "reader", admin=True))
    # A minute, as the page's other HTTP calls: httpx's 5 s default ran out once with
    # the whole suite on two cores.
    api = httpx.Client(base_url=f"{live.url}/v1/profiles/bot/ann/", headers=key, timeout=60)
    assert api.put("user", json={"content": USER_DOC}).is_success
    assert api.put("work", json={"content": {"current_projects": [PROJECT]}}).is_success
    before = {kind: api.get(kind).json() for kind in ("user", "work")}
    page.goto("/profiles?agent=bot&user=ann")
    user = page.locator("#profile-user")
    window = "[name='r:recurring_routines[0].time_windows[0].{}']"
    day = window.format("weekdays") + "[value={}]"
    start = user.locator(window.format("start"))
    expect(start).to_have_value("07:00")
    expect(start).to_have_attribute("type", "time")
    start.fill("")  # a window needs its start
    user.locator(day.format("wed")).uncheck()
    user.locator(day.format("fri")).check()
    meetings = user.locator("[name='s:scheduling_preferences.max_meetings_per_day']")
    expect(meetings).to_have_attribute("type", "number")
    expect(meetings).to_have_attribute("min", "0")
    meetings.fill("4")
    user.locator("button[type=submit]").click()
    # Refused naming the nested field; what was typed is still there.
    expect(page.locator("#profile-user .error")).to_contain_text(
        "recurring_routines[0].time_windows[0].start"
    )
    expect(user.locator(day.format("fri"))).to_be_checked()
    expect(user.locator(day.format("wed"))).not_to_be_checked()
    expect(meetings).to_have_value("4")
    user.locator(window.format("start")).fill("06:30")
    user.locator("button[type=submit]").click()
    expect(page.locator("#profile-user .ok")).to_be_visible()
    work = page.locator("#profile-work")
    milestone = "[name='r:current_projects[0].key_milestones[new].{}']"
    work.locator(milestone.format("name")).fill("Gamma")
    due = work.locator(milestone.format("due_date"))
    expect(due).to_have_attribute("type", "date")
    due.fill("2026-03-01")
    work.locator("[name='x:current_projects[0].key_milestones[1]']").check()
    status = work.locator("select[name='r:current_projects[0].status']")
    expect(status.locator("option:checked")).to_have_text("Active")
    expect(status.locator("option").first).to_have_attribute("value", "")
    status.select_option("paused")
    work.locator("[name='r:current_projects[0].deadline']").fill("2026-06-30")
    work.locator("button[type=submit]").click()
    expect(page.locator("#profile-work .ok")).to_be_visible()

    after = {kind: api.get(kind).json() for kind in ("user", "work")}
    api.close()
    expected_user = copy.deepcopy(before["user"]["content"])
    expected_user["recurring_routines"][0]["time_windows"] = [
        {"weekdays": ["mon", "fri"], "start": "06:30", "end": "08:00"}
    ]
    expected_user["scheduling_preferences"]["max_meetings_per_day"] = 4
    expected_work = copy.deepcopy(before["work"]["content"])
    expected_work["current_projects"][0] |= {"status": "paused", "deadline": "2026-06-30"}
    expected_work["current_projects"][0]["key_milestones"] = [
        {"name": "Alpha", "due_date": "2026-01-15", "status": None, "notes": None},
        {"name": "Gamma", "due_date": "2026-03-01", "status": None, "notes": None},
    ]
    assert after["user"]["content"] == expected_user
    assert after["work"]["content"] == expected_work
    # The one plain field set gains its meta; the others keep theirs.
    new_meta = after["user"]["field_meta"].pop("scheduling_preferences.max_meetings_per_day")
    assert new_meta["source"] == "api"
    for kind in ("user", "work"):
        assert after[kind]["field_meta"] == before[kind]["field_meta"]
        assert after[kind]["version"] == before[kind]["version"] + 1


def test_a_user_is_erased_from_the_profiles_screen_after_confirming(
    page: Page, api_settings: Settings
) -> None:
    client = MemoryClient(api_settings, dispatch=False)
    client.remember("bot", "ann", "Lives in Lisbon")
    client.remember("bot", "bob", "Lives in Porto")
    asked: list[str] = []

    def answer(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.dismiss() if len(asked) == 1 else dialog.accept()

    page.on("dialog", answer)
    page.goto("/profiles?agent=bot&user=ann")
    button = page.get_by_role("button", name="Erase everything")
    button.click()  # dismissed: nothing happens
    button.click()
    expect(page.locator("#erase-result")).to_contain_text("Erased. Rows removed:")
    assert "cannot be undone" in asked[0]
    assert client.list("bot", "ann") == [] and client.list("bot", "bob")


def test_ages_follow_each_languages_plural_rules(page: Page, api_settings: Settings) -> None:
    """ "1 day ago", never "1 days ago"; Chinese in its own words."""
    with session_scope(api_settings.storage) as session:
        for days, text in ((1, "One day old"), (3, "Three days old")):
            memory = make_memory(session, api_settings, text)
            memory.updated_at = utcnow() - timedelta(days=days, minutes=5)
    page.goto("/?lang=en")
    expect(page.locator(".card", has_text="One day old").locator(".age")).to_have_text("1 day ago")
    expect(page.locator(".card", has_text="Three days old").locator(".age")).to_have_text(
        "3 days ago"
    )
    page.goto("/?lang=zh")
    expect(page.locator(".card", has_text="One day old").locator(".age")).to_have_text("1天前")
