"""The page's totals stop counting past a cap ("1,000+"), the pager's links keep the
filters, bad paging parameters are refused readably, and every word of the page exists
in both languages, every stored value with a label and every error with its sentence."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from memoryd.errors import ERROR_TEXTS
from memoryd.models.base import BatchStatus, FailureKind
from memoryd.models.db import session_scope
from memoryd.models.profiles import ProfileStatus
from memoryd.models.tables import Actor, Category, EventKind, MemoryStatus, Tier
from memoryd.server.i18n import LANGUAGES, MESSAGES
from memoryd.server.page import paging
from memoryd.server.page.wording import MISTAKES, TEXT_LENGTHS
from memoryd.settings import Settings
from tests.factories import make_memory
from tests.server.conftest import Keys, bearer, sign_in


def test_a_total_past_the_cap_reads_as_more_and_the_links_keep_the_filters(
    api: TestClient, keys: Keys, api_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(paging, "COUNT_CAP", 10)
    with session_scope(api_settings.storage) as session:
        for i in range(15):
            make_memory(session, api_settings, f"Memory {i}")
    sign_in(api, keys.admin)
    html = api.get("/?limit=5&q=memory&lang=en").text
    assert "1–5 of 10+" in html
    assert 'rel="next" href="/?limit=5&amp;q=memory&amp;lang=en&amp;offset=5"' in html
    html = api.get("/?limit=5&offset=10&q=memory").text
    assert "11–15 of 15" in html and 'rel="next"' not in html  # counted on from the page
    monkeypatch.setattr(paging, "COUNT_CAP", 15)
    html = api.get("/?limit=5&q=memory&lang=en").text
    assert "1–5 of 15<" in html  # exactly the cap: no "+"


@pytest.mark.parametrize("query", ["offset=-1", "limit=0", "limit=501", "offset=x"])
def test_bad_paging_is_refused_with_a_readable_page(
    api: TestClient, keys: Keys, query: str
) -> None:
    sign_in(api, keys.admin)
    response = api.get(f"/?{query}&lang=en", headers={"accept": "text/html"})
    assert response.status_code == 422
    assert response.headers["content-type"].startswith("text/html")
    assert "Something went wrong" in response.text
    # From htmx: a line for the page's error slot, not for the element that asked.
    fragment = api.get("/batches?status=nope", headers={"hx-request": "true"})
    assert fragment.headers["hx-retarget"] == "#page-error"
    assert fragment.text.startswith('<p class="message error" data-problem="invalid-request">')
    # The API's answers stay problem JSON, whatever the client accepts.
    answer = api.get("/v1/batches?limit=0", headers={**bearer(keys.admin), "accept": "text/html"})
    assert answer.headers["content-type"] == "application/problem+json"


def test_every_word_and_every_stored_value_exists_in_both_languages() -> None:
    assert set(MESSAGES["en"]) == set(MESSAGES["zh"])
    for kind, values in {
        "category": Category,
        "tier": Tier,
        "status": MemoryStatus,
        "batch": BatchStatus,
        "failure": FailureKind,
        "event": EventKind,
        "actor": Actor,
        "profile_status": ProfileStatus,
    }.items():
        for value in values:
            for lang in LANGUAGES:
                assert f"{kind}.{value}" in MESSAGES[lang], (lang, kind, value)
    for lang in LANGUAGES:
        assert {f"problem.{code}" for code in ERROR_TEXTS} <= set(MESSAGES[lang])
        for mistake in {*MISTAKES.values(), *TEXT_LENGTHS.values()}:
            assert f"invalid.{mistake}" in MESSAGES[lang], (lang, mistake)


def test_the_api_keeps_its_english_where_the_chinese_page_words_an_error_anew(
    api: TestClient, keys: Keys
) -> None:
    answer = api.get("/v1/memories/bot/ann/999", headers=bearer(keys.admin))
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["detail"] == "no memory 999 for 'bot'/'ann'"
    sign_in(api, keys.admin)
    sentences = {"zh": "未找到：没有编号为 999 的记忆", "en": "Not found: no memory 999"}
    for lang, sentence in sentences.items():
        fragment = api.get(f"/memories/999/edit?lang={lang}", headers={"hx-request": "true"})
        assert fragment.status_code == 404 and f">{sentence}</p>" in fragment.text
