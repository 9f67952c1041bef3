"""Keyword BM25 and trigram similarity over the whole scope, alike on both databases."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.models.db import session_scope, utcnow
from memoryd.models.keys import Scope
from memoryd.models.tables import Category, MemoryTerm, Tier
from memoryd.recall import search
from memoryd.recall.bm25 import bm25_ranked, term_weights
from memoryd.recall.search import scope_stats, search_params
from memoryd.recall.trigrams import trigram_ranked
from memoryd.settings import Settings
from memoryd.text import query_term_counts, query_tokens, search_tokens
from tests.conftest import make_settings
from tests.factories import make_memory

FIXED_SET = [
    "Prefers green tea in the morning",
    "Drinks black coffee before meetings",
    "Tea ceremony lessons on Saturdays, green and matcha tea",
    "Ran the Lisbon marathon in 2024",
    "Runs five kilometres every morning before work",
    "Training for a half marathon in spring",
    "Allergic to peanuts and tree nuts",
    "Uses vim as the main editor, with a dark theme",
    "Works on the payment module refactor with Ana",
    "The payment module release is planned for Friday",
    "喜欢喝龙井茶",
    "每周三下午开项目周会",
    "住在杭州西湖附近",
    "正在学习日语，每周两节课",
    "Prefers short, direct answers",
    "Has a daughter, Mia, who plays the violin",
    "Plays the cello on Sundays",
    "Wants reminders about the dentist appointment",
    "Dislikes meetings before 10am",
    "Learning Portuguese for a move to Lisbon",
]
QUERIES = [
    "what did the user drink in the morning",
    "green tea",
    "half marathon training",
    "payment module",
    "龙井茶",
    "周会",
    "Lisbon",
    "what instrument does her daughter play",
    "meetings",
    "allergic",
    "teas",
    "tea before the marathon? tea, green tea",
]


ANN = Scope("bot", "ann")
ANNS_MEMORIES = search_params(ANN, None, None)


def keyword_order(settings: Settings, query: str) -> list[tuple[int, float]]:
    with session_scope(settings.storage, readonly=True) as session:
        stats = scope_stats(session, ANNS_MEMORIES)
        counts = query_term_counts(query)
        terms = list(counts)
        weights = term_weights(terms, counts)
        return bm25_ranked(session, ANN, None, None, terms, stats, weights=weights)


def trigram_order(settings: Settings, query: str) -> list[tuple[int, float]]:
    with session_scope(settings.storage, readonly=True) as session:
        stats = scope_stats(session, ANNS_MEMORIES)
        return trigram_ranked(session, ANN, None, None, query, 0.3, stats)


def posting_lengths(settings: Settings) -> dict[str, int]:
    """Each posting's term and the length of its memory that it carries."""
    with session_scope(settings.storage, readonly=True) as session:
        rows = session.execute(select(MemoryTerm.term, MemoryTerm.search_length)).all()
        return {row.term: row.search_length for row in rows}


PARTIAL_QUERIES = ["marath", "paymnt modul", "龙井茶", "violin lessons", "dentst"]


def test_both_databases_rank_a_fixed_set_identically(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    rankings = {}
    for backend in ("sqlite", "postgres"):
        settings = make_settings(backend, tmp_path / backend, request)
        client = MemoryClient(settings, dispatch=False)
        ids = [client.remember("bot", "ann", fact).id for fact in FIXED_SET]
        client.remember("bot", "bob", "Prefers green tea, always green tea")  # not ann's
        rankings[backend] = [
            [(FIXED_SET[ids.index(mid)], score) for mid, score in order(settings, q)]
            for order, queries in ((keyword_order, QUERIES), (trigram_order, PARTIAL_QUERIES))
            for q in queries
        ]
    assert rankings["sqlite"] == rankings["postgres"]
    assert all(ranking for ranking in rankings["sqlite"])  # every query found something


def test_bm25_weighs_rare_terms_and_short_memories(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    for fact in FIXED_SET:
        client.remember("bot", "ann", fact)
    top = [client.recall(q, "bot", "ann")[0].content for q in QUERIES]
    assert top[0] in ("Prefers green tea in the morning", "Drinks black coffee before meetings")
    assert top[2] == "Training for a half marathon in spring"
    assert top[4] == "喜欢喝龙井茶"
    assert top[5] == "每周三下午开项目周会"
    assert top[7] == "Has a daughter, Mia, who plays the violin"
    # "teas" stems to "tea"; the memory that says tea twice ranks with the one-line fact.
    assert "tea" in top[10].casefold()


def test_a_question_made_of_stop_words_does_not_drown_its_one_word() -> None:
    assert query_tokens("What did the user do about the dentist?") == ["dentist"]
    assert search_tokens("Preferences preferred PREFERS") == ["prefer"] * 3
    assert "喜欢" in search_tokens("我喜欢喝茶") and "我" not in search_tokens("我喜欢喝茶")


def test_postings_follow_status_and_content(settings: Settings) -> None:
    """Triggers keep the postings: edits reindex, retired memories leave the index."""
    client = MemoryClient(settings, dispatch=False)
    tea = client.remember("bot", "ann", "Prefers green tea")
    client.update("bot", "ann", tea.id, content="Prefers oolong", name="Tea choice")
    assert keyword_order(settings, "green") == []
    assert [m for m, _ in keyword_order(settings, "oolong")] == [tea.id]
    # The edit took the length from 6 terms (name and content "Prefers green tea") to 4.
    assert posting_lengths(settings) == {"tea": 4, "choic": 4, "prefer": 4, "oolong": 4}
    client.forget("bot", "ann", tea.id)
    with session_scope(settings.storage, readonly=True) as session:
        assert session.scalars(select(MemoryTerm.term)).all() == []
    client.restore("bot", "ann", tea.id)
    assert [m for m, _ in keyword_order(settings, "oolong")] == [tea.id]


@pytest.mark.parametrize("scan_limit", [400, 50], ids=["scanned", "through the postings"])
def test_every_memory_of_the_scope_is_a_candidate(
    settings: Settings, db: Session, monkeypatch: pytest.MonkeyPatch, scan_limit: int
) -> None:
    """An old memory is found by a partial word even behind many newer ones (301 in
    all): a small scope is scored row by row, a large one searched through the
    postings."""
    monkeypatch.setattr(search, "SCAN_LIMIT", scan_limit)
    long_ago = utcnow() - timedelta(days=400)
    old = make_memory(db, settings, "Vegetarian since 2019", now=long_ago)
    for i in range(300):
        make_memory(db, settings, f"Note {i}: the weekly report number {i} was sent")
    db.commit()
    hits = MemoryClient(settings, dispatch=False).recall("vegetar", "bot", "ann")
    assert [h.id for h in hits][:1] == [old.id]  # no whole word in common
    assert hits[0].parts.similarity > 0


def test_a_large_scope_reuses_its_statistics_yet_finds_a_new_memory_at_once(
    settings: Settings, db: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above LARGE_SCOPE the BM25 statistics are reused for a while; the postings are
    not, so a memory saved a moment ago is found by the next recall."""
    monkeypatch.setattr(search, "SCAN_LIMIT", 50)
    monkeypatch.setattr(search, "LARGE_SCOPE", 50)
    for i in range(60):
        make_memory(db, settings, f"Note {i}: the weekly report number {i} was sent")
    db.commit()
    client = MemoryClient(settings, dispatch=False)
    assert client.recall("violin", "bot", "ann") == []
    stats = search.scope_stats(db, ANNS_MEMORIES)
    assert stats.docs == 60
    new = client.remember("bot", "ann", "Has a daughter who plays the violin")
    hits = client.recall("violin", "bot", "ann")
    assert [h.id for h in hits] == [new.id]


@pytest.mark.parametrize("scan_limit", [search.SCAN_LIMIT, 50])
def test_categories_and_tiers_narrow_both_lists(
    settings: Settings, db: Session, monkeypatch: pytest.MonkeyPatch, scan_limit: int
) -> None:
    """Keyword and trigram lists keep only the categories and tiers asked for, whether
    the scope is scanned or searched through its indexes, and the shared scope's
    memories pass through the same filters."""
    monkeypatch.setattr(search, "SCAN_LIMIT", scan_limit)
    reference = {"category": Category.REFERENCE, "tier": Tier.SHORT}
    ref = make_memory(db, settings, "Vegetarian cookbook", **reference)
    shared = make_memory(db, settings, "Vegetarian canteen menu", user_id="*", **reference)
    long_term = make_memory(db, settings, "Vegetarian since 2019", tier=Tier.LONG)
    make_memory(db, settings, "Vegetarian restaurant nearby", tier=Tier.SHORT)
    make_memory(db, settings, "Vegetarian lunch", user_id="bob", **reference)
    for i in range(60):
        make_memory(db, settings, f"Note {i}: the weekly report number {i} was sent")
    db.commit()
    stats = scope_stats(db, ANNS_MEMORIES)

    def found(categories: list[str] | None, tiers: list[str] | None) -> tuple[set[int], ...]:
        keyword = bm25_ranked(db, ANN, categories, tiers, ["vegetarian"], stats)
        trigram = trigram_ranked(db, ANN, categories, tiers, "vegetar", 0.3, stats)
        return {mid for mid, _ in keyword}, {mid for mid, _ in trigram}

    assert found([Category.REFERENCE], None) == ({ref.id, shared.id},) * 2
    assert found(None, [Tier.LONG]) == ({long_term.id},) * 2
    assert found([Category.REFERENCE], [Tier.LONG]) == (set(), set())


def test_a_stale_count_never_makes_a_term_weigh_less_than_nothing(
    settings: Settings, db: Session
) -> None:
    """A large scope's count is reused for 30 s while it grows: a term held by more
    memories than were counted still raises a memory's score, it never lowers it."""
    for i in range(6):
        make_memory(db, settings, f"Walks the dog every morning, note {i}")
    make_memory(db, settings, "Walks to work on Fridays")
    db.commit()
    counted_before_growth = search.ScopeStats(docs=2, total_length=8)
    ranked = bm25_ranked(db, ANN, None, None, ["dog", "walk"], counted_before_growth)
    assert len(ranked) == 7 and all(score > 0 for _id, score in ranked)
    assert min(score for _id, score in ranked[:6]) > ranked[6][1]  # "dog" adds, not takes


def test_a_word_the_question_keeps_coming_back_to_weighs_more(settings: Settings) -> None:
    """A pasted dialogue says its topic again and again; a word said once in passing
    does not outrank it, though its memory is the shorter one."""
    client = MemoryClient(settings, dispatch=False)
    client.remember("bot", "ann", "Ran a marathon")
    client.remember("bot", "ann", "Drinks green tea every morning before work")
    question = "Big race day, the marathon! But first: tea. Which tea do I like? Tea, please."
    assert client.recall(question, "bot", "ann")[0].content.startswith("Drinks green tea")
    assert client.recall("tea or a marathon?", "bot", "ann")[0].content == "Ran a marathon"
