"""Every screen of the page in a real Chromium, in both languages, at a phone's width
with 200-character ids: no sideways scrolling, nothing left in English on the Chinese
page; lists page through their totals, batches filter by status, a destructive action
asks first, an error reads as a sentence in the page's language, the server's detail
included. Screenshots go to the test's tmp_path."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import get_args

import pytest
from playwright.sync_api import Browser, Page, expect
from pydantic import BaseModel
from sqlalchemy import update

from memoryd.client import MemoryClient
from memoryd.models.base import BatchStatus
from memoryd.models.db import session_scope, utcnow
from memoryd.models.profiles import CONTENT_MODELS, ProfileType
from memoryd.models.tables import ExtractionBatch, Memory, MemoryStatus, Turn, TurnStatus
from memoryd.server.i18n_labels import LABELS
from memoryd.settings import Settings
from tests.factories import add_turns, make_memory
from tests.server.conftest import LiveServer, make_key

PHONE = {"width": 390, "height": 844}
LONG_AGENT = "agent-" + "a" * 194  # 200 characters, one unbreakable word
LONG_USER = "user-" + "u" * 195
# The English words of badges, options, buttons and status labels: none may be left on
# the Chinese page (ids and memory text are data, and are not looked at).
ENGLISH = sorted(
    {v for k, v in LABELS["en"].items() if not k.startswith(("error.", "pager.", "actor."))}
    | {"Edit", "Delete", "Restore", "History", "Approve", "Decline", "Save", "Cancel"}
    | {"Retry", "Retry all", "Skip", "Search", "any", "Open", "default", "Sign out"}
)
LABELLED = (
    "h1, h2, label, button, option, th, .badge, .tier, .status, .batch-status, .pager,"
    " .stat span, legend, small"
)
SCREENS = [
    "/",
    "/conflicts",
    "/review",
    "/batches",
    f"/profiles?agent={LONG_AGENT}&user={LONG_USER}",
    f"/agents?agent={LONG_AGENT}",
]

OpenPage = Callable[..., Page]


@pytest.fixture
def open_page(
    browser: Browser,
    live: LiveServer,
    api_settings: Settings,
) -> Iterator[OpenPage]:
    """A signed-in page of the given viewport (the sign-in form, as a person would)."""
    contexts = []

    def open_(viewport: dict[str, int] | None = None) -> Page:
        context = browser.new_context(base_url=live.url, viewport=viewport or PHONE)
        contexts.append(context)
        page = context.new_page()
        page.goto("/login")
        page.fill("input[name=key]", make_key(api_settings, "ops", admin=True))
        page.click("button[type=submit]")
        expect(page.locator("#health-panel")).to_be_visible()
        return page

    yield open_
    for context in contexts:
        context.close()


def seed_long_ids(settings: Settings) -> None:
    """A memory of each state the screens show, a conflict, a review item, a batch of
    each status and a dead letter, all under 200-character ids."""
    client = MemoryClient(settings, dispatch=False)
    text = "A long memory without spaces: " + "x" * 400
    old = client.remember(LONG_AGENT, LONG_USER, "Lives in Lisbon", tags=["t" * 150])
    client.remember(LONG_AGENT, LONG_USER, text, replaces=old.id)
    with session_scope(settings.storage) as session:
        make_memory(
            session,
            settings,
            "Maybe likes jazz",
            agent_id=LONG_AGENT,
            user_id=LONG_USER,
            confidence=0.6,
        )
        for status in BatchStatus:
            session.add(batch(status, agent_id=LONG_AGENT, user_id=LONG_USER))
    add_turns(settings, 1, agent_id=LONG_AGENT, user_id=LONG_USER, session_id="s" * 200)
    fail_every_turn(settings)


def batch(status: BatchStatus, **ids: str) -> ExtractionBatch:
    scope = {"agent_id": "bot", "user_id": "ann", "session_id": "s1"} | ids
    return ExtractionBatch(
        **scope,
        status=status,
        started_at=utcnow(),
        turn_count=1,
        error_kind="transient" if status == BatchStatus.FAILED else None,
    )


def fail_every_turn(settings: Settings) -> None:
    with session_scope(settings.storage) as session:
        session.execute(update(Turn).values(status=TurnStatus.FAILED))


def english_left(page: Page) -> list[str]:
    texts = page.locator(LABELLED).all_inner_texts()
    found = set()
    for text in texts:
        for word in ENGLISH:
            if re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text):
                found.add(word)
    return sorted(found)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_screen_fits_a_phone_with_200_character_ids(
    open_page: OpenPage, api_settings: Settings, tmp_path: Path, lang: str
) -> None:
    seed_long_ids(api_settings)
    page = open_page()
    page.goto(f"/?lang={lang}")
    for number, path in enumerate(SCREENS):
        page.goto(path)
        expect(page.locator("main h1, main #health-panel").first).to_be_visible()
        width = page.evaluate("document.scrollingElement.scrollWidth")
        assert width <= PHONE["width"], f"{path} ({lang}) is {width} px wide"
        page.screenshot(path=str(tmp_path / f"{lang}-{number}.png"), full_page=True)
        if lang == "zh":
            assert english_left(page) == [], path
    # The navigation stays usable: its own row, every area reachable.
    nav = page.locator("header.top nav")
    box = nav.bounding_box()
    assert box is not None and box["x"] + box["width"] <= PHONE["width"]
    nav.locator("a").last.click()
    expect(page).to_have_url(re.compile(r"/agents$"))


def test_the_chinese_page_names_badges_options_and_statuses_in_chinese(
    open_page: OpenPage, api_settings: Settings
) -> None:
    seed_long_ids(api_settings)
    page = open_page({"width": 1200, "height": 900})
    page.goto("/?lang=zh&status=active")
    card = page.locator("article.card").first
    expect(card.locator(".badge")).to_have_text("用户")
    expect(page.locator("select[name=status] option[value=deleted]")).to_have_text("已删除")
    page.goto("/batches")
    expect(page.locator("select[name=status] option[value=failed]")).to_have_text("失败")
    assert english_left(page) == []


def test_pages_reach_the_51st_memory_and_say_how_many_there_are(
    open_page: OpenPage, api_settings: Settings
) -> None:
    with session_scope(api_settings.storage) as session:
        for i in range(51):
            make_memory(session, api_settings, f"Memory number {i}")
    page = open_page({"width": 1200, "height": 900})
    page.goto("/?lang=en")
    pager = page.locator("nav.pager").first
    expect(pager.locator(".total")).to_have_text("1–50 of 51")
    expect(page.locator("article.card")).to_have_count(50)
    expect(pager.locator("a[rel=prev]")).to_have_count(0)
    pager.locator("a[rel=next]").click()
    expect(page.locator("article.card")).to_have_count(1)
    expect(page.locator("article.card .content")).to_have_text("Memory number 0")  # the oldest
    expect(page.locator("nav.pager .total").first).to_have_text("51–51 of 51")
    expect(page.locator("nav.pager a[rel=next]")).to_have_count(0)
    page.goto("/?lang=zh")
    expect(page.locator("nav.pager .total").first).to_have_text("第 1–50 条，共 51 条")


def test_batches_filter_by_status_with_dead_letters_first(
    open_page: OpenPage, api_settings: Settings
) -> None:
    with session_scope(api_settings.storage) as session:
        for status in [*BatchStatus, BatchStatus.FAILED, BatchStatus.DONE]:
            session.add(batch(status))
    add_turns(api_settings, 1)
    fail_every_turn(api_settings)
    page = open_page({"width": 1200, "height": 900})
    page.goto("/batches?lang=en")
    expect(page.locator("table.batches tbody tr")).to_have_count(6)
    first = page.evaluate(
        "document.querySelector('table.dead').compareDocumentPosition("
        "document.querySelector('table.batches')) & Node.DOCUMENT_POSITION_FOLLOWING"
    )
    assert first, "dead letters come before the batches"
    page.select_option("select[name=status]", "failed")
    page.click("form.filters button[type=submit]")
    expect(page).to_have_url(re.compile(r"status=failed"))
    statuses = page.locator("table.batches td.batch-status")
    expect(statuses).to_have_count(2)
    assert set(statuses.all_inner_texts()) == {"failed"}
    expect(page.locator("nav.pager[data-list=offset] .total")).to_have_text("1–2 of 2")
    expect(page.locator("table.dead tbody tr")).to_have_count(1)
    page.select_option("select[name=status]", "")  # "any" again: every batch
    page.click("form.filters button[type=submit]")
    expect(page.locator("table.batches tbody tr")).to_have_count(6)


def test_review_buttons_sit_inside_their_card_and_decline_asks_first(
    open_page: OpenPage, api_settings: Settings
) -> None:
    with session_scope(api_settings.storage) as session:
        jazz = make_memory(session, api_settings, "Maybe likes jazz", confidence=0.6).id
    page = open_page()
    page.goto("/review?lang=en")
    card = page.locator(f"#review-{jazz} article.card")
    decline = card.get_by_role("button", name="Decline")
    inner, outer = decline.bounding_box(), card.bounding_box()
    assert (
        inner
        and outer
        and outer["x"] <= inner["x"]
        and (inner["x"] + inner["width"] <= outer["x"] + outer["width"])
    )
    asked: list[str] = []
    page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    decline.click()
    expect(card).to_be_visible()
    assert asked and status_of(api_settings, jazz) == MemoryStatus.ACTIVE
    page.once("dialog", lambda d: d.accept())
    decline.click()
    expect(page.locator(".message")).to_have_text("Done.")
    assert status_of(api_settings, jazz) == MemoryStatus.DELETED


def test_deleting_a_memory_asks_first(open_page: OpenPage, api_settings: Settings) -> None:
    tea = MemoryClient(api_settings, dispatch=False).remember("bot", "ann", "Prefers tea")
    page = open_page({"width": 1200, "height": 900})
    page.goto("/?lang=zh")
    asked: list[str] = []
    page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    page.locator(f"#memory-{tea.id}").get_by_role("button", name="删除").click()
    expect(page.locator(f"#memory-{tea.id} .status")).to_have_count(0)
    assert asked == ["删除这条记忆？之后可以恢复。"]
    assert status_of(api_settings, tea.id) == MemoryStatus.ACTIVE


EDIT = {"en": "Edit", "zh": "编辑"}  # the memory card's Edit button, in each language


def edit_a_memory_deleted_meanwhile(
    open_page: OpenPage, settings: Settings, memory_id: int, lang: str
) -> Page:
    """A desktop page in `lang` showing the memory, which is then deleted behind the
    page's back, and its Edit button clicked: the page says why it cannot be edited."""
    page = open_page({"width": 1200, "height": 900})
    page.goto(f"/?lang={lang}")
    with session_scope(settings.storage) as session:
        session.delete(session.get(Memory, memory_id))
    page.locator(f"#memory-{memory_id}").get_by_role("button", name=EDIT[lang]).click()
    return page


def test_an_error_reads_as_a_sentence_not_json(open_page: OpenPage, api_settings: Settings) -> None:
    tea = MemoryClient(api_settings, dispatch=False).remember("bot", "ann", "Prefers tea")
    page = edit_a_memory_deleted_meanwhile(open_page, api_settings, tea.id, "en")
    expect(page.locator("#page-error")).to_have_text(f"Not found: no memory {tea.id}")
    expect(page.locator(f"#memory-{tea.id} .content")).to_have_text("Prefers tea")
    # A problem refused before any route ran (a body over max_request_bytes: 413 problem
    # JSON from the middleware) leaves the card as it is and says the action failed.
    page.route(
        "**/memories/*/edit*",
        lambda route: route.fulfill(
            status=413,
            content_type="application/problem+json",
            body='{"type": "about:blank", "title": "too large", "status": 413}',
        ),
    )
    kept = MemoryClient(api_settings, dispatch=False).remember("bot", "ann", "Likes jazz")
    page.goto("/?lang=en")
    page.locator(f"#memory-{kept.id}").get_by_role("button", name="Edit").click()
    expect(page.locator("#page-error")).to_have_text("Something went wrong")
    expect(page.locator(f"#memory-{kept.id} .content")).to_have_text("Likes jazz")
    expect(page.locator("main")).not_to_contain_text('"status"')
    response = page.goto("/?offset=-1&lang=zh")
    assert response is not None and response.status == 422
    expect(page.locator("h1")).to_have_text("出错了")
    expect(page.locator("main")).not_to_contain_text('"type"')


def test_the_chinese_page_words_the_servers_errors_in_chinese(
    open_page: OpenPage, api_settings: Settings
) -> None:
    """The server's English detail (no memory 5, …) never reaches the Chinese page: each
    error is worded again from its code, a validation error from its type."""
    client = MemoryClient(api_settings, dispatch=False)
    tea = client.remember("bot", "ann", "Prefers tea")
    with session_scope(api_settings.storage) as session:
        jazz = make_memory(session, api_settings, "Maybe likes jazz", confidence=0.6).id
    page = edit_a_memory_deleted_meanwhile(open_page, api_settings, tea.id, "zh")
    expect(page.locator("#page-error")).to_have_text(f"未找到：没有编号为 {tea.id} 的记忆")
    kept = client.remember("bot", "ann", "Likes jazz")
    page.reload()
    page.locator(f"#memory-{kept.id}").get_by_role("button", name="编辑").click()
    page.fill(f"#memory-{kept.id} textarea[name=content]", "x" * 5000)
    page.click(f"#memory-{kept.id} button[type=submit]")
    expect(page.locator(f"#memory-{kept.id} .message.error")).to_have_text(
        "content：最多 4000 个字符"
    )
    page.goto("/review")
    client.forget("bot", "ann", jazz)  # deleted since the queue was shown
    page.locator(f"#review-{jazz}").get_by_role("button", name="通过").click()
    expect(page.locator("#page-error")).to_have_text(
        f"当前状态下无法执行：记忆 {jazz} 当前为「已删除」，请先恢复"
    )
    page.goto("/profiles?agent=bot&user=ann")
    user = page.locator("#profile-user")
    user.locator("[name='s:timezone']").fill("Mars/Olympus")
    user.locator("[name='l:scheduling_preferences.preferred_meeting_duration_minutes']").fill(
        "很快"
    )
    user.locator("button[type=submit]").click()
    expect(page.locator("#profile-user .error")).to_have_text(
        "timezone：'Mars/Olympus' 不是时区：请填写 IANA 时区名（如 'Asia/Shanghai'）"
        "或 UTC 偏移（如 'UTC+8'、'UTC-03:30'）；"
        "scheduling_preferences.preferred_meeting_duration_minutes[0]：应为整数"
    )
    response = page.goto("/?offset=-1")
    assert response is not None and response.status == 422
    expect(page.locator("main .message.error")).to_have_text("请求无效：offset：应不小于 0")
    for shown in (page.locator("main"), page.locator("#page-error")):
        expect(shown).not_to_contain_text("Input should")


def test_the_chinese_profile_form_labels_its_fields_in_chinese(
    open_page: OpenPage, api_settings: Settings, tmp_path: Path
) -> None:
    """No schema key is left as a label, a legend or a choice on the Chinese page, down
    to a project's milestones and a routine's time windows; keys stay in names only."""
    client = MemoryClient(api_settings, dispatch=False)
    client.put_profile("bot", "ann", ProfileType.USER, PROFILE_USER)
    client.put_profile("bot", "ann", ProfileType.WORK, PROFILE_WORK)
    page = open_page()
    page.goto("/profiles?agent=bot&user=ann&lang=zh")
    forms = page.locator(".profile-form")
    expect(forms).to_have_count(2)
    expect(forms.first.locator("[name='r:places[0].preference'] option:checked")).to_have_text(
        "避开"
    )
    expect(page.locator("[data-field='work_habits.available_hours']").first).to_be_visible()
    page.screenshot(path=str(tmp_path / "zh-profiles.png"), full_page=True)
    width = page.evaluate("document.scrollingElement.scrollWidth")
    assert width <= PHONE["width"], f"the profile form is {width} px wide"
    keys = {k for m in CONTENT_MODELS.values() for k in schema_keys(m)}
    shown = " ".join(forms.locator("label, legend, dt, option, small, span").all_inner_texts())
    left = sorted(k for k in keys if re.search(rf"(?<![\w.]){k}(?![\w])", shown))
    assert left == []
    assert forms.locator("[name='r:places[0].commute_minutes']").count() == 1


PROFILE_USER = {
    "places": [{"name": "Gym", "commute_minutes": 10, "preference": "avoid"}],
    "recurring_routines": [
        {"name": "Swim", "time_windows": [{"weekdays": ["mon"], "start": "07:00", "end": "08:00"}]}
    ],
    "scheduling_preferences": {"no_meeting_windows": [{"start": "12:00", "end": "13:00"}]},
}
PROFILE_WORK = {
    "current_projects": [
        {"name": "Atlas", "status": "active", "key_milestones": [{"name": "Alpha"}]}
    ],
    "work_habits": {"available_hours": [{"weekdays": ["tue"], "start": "09:00", "end": "17:00"}]},
    "team_members": [{"name": "Rui"}],
}


def schema_keys(model: type[BaseModel]) -> Iterator[str]:
    """Every field of `model` and of the records in it, down."""
    for key, info in model.model_fields.items():
        yield key
        for kind in (info.annotation, *get_args(info.annotation)):
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                yield from schema_keys(kind)


def status_of(settings: Settings, memory_id: int) -> str:
    with session_scope(settings.storage, readonly=True) as session:
        memory = session.get(Memory, memory_id)
        assert memory is not None
        return memory.status
