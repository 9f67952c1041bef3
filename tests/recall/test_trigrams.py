"""The trigram list: its fast share is the trigram-set share, and a scope larger than
SCAN_LIMIT finds partial words through the postings, alike on both databases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import event

from bench.replacement import store_filler
from memoryd.client import MemoryClient
from memoryd.models.db import get_engine, session_scope
from memoryd.models.keys import Scope
from memoryd.recall import search
from memoryd.recall.trigrams import MAX_PREFIXES, TrigramShare, prefixes, trigram_ranked
from memoryd.text import word_trigrams
from tests.conftest import make_settings

# Letters, digits, separators of both scripts, and characters NFKC folds (full-width,
# ligatures), so both of TrigramShare's paths meet what word_trigrams normalises.
TEXT = st.text(alphabet="abcXYZé 09_-.,!?\t茶龙井杭州，。ＡＢ１ﬁ", max_size=60)


@given(query=TEXT, text=TEXT)
def test_the_fast_share_is_the_share_of_trigram_sets(query: str, text: str) -> None:
    grams = word_trigrams(query)
    expected = len(grams & word_trigrams(text)) / len(grams) if grams else 0.0
    assert TrigramShare(query)(text) == expected


def test_prefixes_take_stems_and_chinese_pairs() -> None:
    assert prefixes("vegetar dentst") == ["veget", "dent"]
    assert prefixes("moving moves") == ["mov"]  # one range holds both
    assert prefixes("龙井茶") == ["井茶", "龙井"]
    assert prefixes("go to it") == []  # words too short: the keyword list's


PARTIAL = {
    "vegetar": "Vegetarian since 2019",
    "paymnt modul": "Works on the payment module refactor with Ana",
    "dentst": "Wants reminders about the dentist appointment",
    "龙井茶": "喜欢喝龙井茶",
}
ANN = Scope("bench", "ann")


def test_a_large_scope_finds_partial_words_alike_on_both_databases(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """400 memories of real conversation (more than SCAN_LIMIT) and four targets: each
    partial query puts its target first, through the postings, and both databases
    return the same list with the same scores."""
    rankings = {}
    for backend in ("sqlite", "postgres"):
        settings = make_settings(backend, tmp_path / backend, request)
        client = MemoryClient(settings, dispatch=False)
        targets = {client.remember("bench", "ann", text).id: text for text in PARTIAL.values()}
        store_filler(settings, ANN, search.SCAN_LIMIT + 200, seed=11)
        ranking = {}
        with session_scope(settings.storage, readonly=True) as session:
            stats = search.scope_stats(session, search.search_params(ANN, None, None))
            assert stats.docs > search.SCAN_LIMIT  # the indexed path, not the scan
            for query in PARTIAL:
                found = trigram_ranked(session, ANN, None, None, query, 0.3, stats)
                ranking[query] = [(targets.get(mid, "other"), score) for mid, score in found]
        rankings[backend] = ranking
    assert rankings["sqlite"] == rankings["postgres"]
    for query, target in PARTIAL.items():
        best = rankings["sqlite"][query][0][1]
        assert (target, best) in rankings["sqlite"][query], (query, rankings["sqlite"][query][:5])


def test_postgres_searches_with_one_statement_text_whatever_the_querys_length(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The keyword and prefix searches send their lists as arrays on PostgreSQL: queries
    of 1 to 16 words reuse the same two statements, which psycopg then prepares once (a
    text per length was planned on every run, and 16 prefixes took more parameters than
    psycopg prepares)."""
    settings = make_settings("postgres", tmp_path, request)
    client = MemoryClient(settings, dispatch=False)
    store_filler(settings, ANN, search.SCAN_LIMIT + 50, seed=3)
    sent: list[str] = []
    engine = get_engine(settings.storage, autocommit=True)  # recall's, on PostgreSQL

    def keep(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "memory_terms" in statement:
            sent.append(statement)

    event.listen(engine, "before_cursor_execute", keep)
    try:
        words = [
            "quarterly",
            "payment",
            "module",
            "refactor",
            "dentist",
            "vegetarian",
            "marathon",
            "training",
        ]
        for n in (1, 3, 8):
            client.recall(" ".join(words[:n] * 2), "bench", "ann")
        client.recall(LONG_QUESTION, "bench", "ann")
    finally:
        event.remove(engine, "before_cursor_execute", keep)
    assert len(prefixes(LONG_QUESTION)) == MAX_PREFIXES
    assert len(sent) == 8  # a keyword and a prefix search per recall
    assert len(set(sent)) == 2


LONG_QUESTION = (
    "Remember the conversation about planning the wedding reception, choosing musicians, "
    "booking photographers, comparing venues downtown, negotiating catering contracts, "
    "arranging transportation, organising accommodation, selecting invitations, "
    "coordinating florists and rehearsal schedules?"
)
