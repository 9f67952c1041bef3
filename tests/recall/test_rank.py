"""Hybrid recall: ranking in English and Chinese, hostile queries, statuses, isolation."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from sqlalchemy.orm import Session

from memoryd.agents import config as agent_config
from memoryd.agents.config import AgentSettings
from memoryd.client import MemoryClient
from memoryd.maintenance.cycle import run_cycle
from memoryd.models.db import utcnow
from memoryd.models.keys import Scope
from memoryd.models.tables import Category, Memory, MemoryStatus
from memoryd.recall import candidates
from memoryd.recall.rank import recall
from memoryd.settings import Settings
from tests.factories import make_memory

FACTS = {
    "tea": "Prefers green tea in the morning",
    "city": "Lives in Lisbon",
    "longjing": "喜欢喝龙井茶",
    "meeting": "项目周会在每周三下午",
    "allergy": "Allergic to peanuts",
    "editor": "Uses vim as the main editor",
    "tokyo": "東京の会社で働いている",
}


@pytest.fixture
def client(settings: Settings, db: Session) -> MemoryClient:
    for content in FACTS.values():
        make_memory(db, settings, content)
    db.commit()
    return MemoryClient(settings, dispatch=False)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("what tea do I like?", "tea"),
        ("which editor should I open", "editor"),
        ("龙井", "longjing"),
        ("周会", "meeting"),  # a 2-character Chinese word
        ("周三有什么安排", "meeting"),
        ("any peanut allergy?", "allergy"),  # partial word
        ("Lisbo", "city"),
        ("东京", "tokyo"),  # simplified query, Japanese memory: shares 京
        ("周三 meeting", "meeting"),
        ("我喜欢喝什么茶", "longjing"),
    ],
)
def test_right_memory_ranks_first(client: MemoryClient, query: str, expected: str) -> None:
    hits = client.recall(query, "bot", "ann")
    assert hits, query
    assert hits[0].content == FACTS[expected]
    assert hits[0].parts.fused > 0


def test_nothing_relevant_returns_nothing(client: MemoryClient) -> None:
    assert client.recall("quantum chromodynamics", "bot", "ann") == []


def test_empty_query_returns_the_strongest_memories(client: MemoryClient) -> None:
    assert len(client.recall("", "bot", "ann", k=3)) == 3


HOSTILE = [
    '"tea',
    'tea"',
    "tea*",
    "*",
    "NEAR(tea, morning)",
    "tea AND OR NOT",
    "tea:* | !!( & ",
    "'; DROP TABLE memories; --",
    "🎉🍵 tea 🍵",
    "\\x00\\",
    "^tea$",
    "col:tea",
    "(((((",
    "",
    "   ",
    "tea " * 2500,  # 10 KB
    "茶" * 5000,
]


@pytest.mark.parametrize("query", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_queries_never_raise(client: MemoryClient, query: str) -> None:
    hits = client.recall(query, "bot", "ann")
    if "tea" in query:
        assert hits[0].content == FACTS["tea"]


@hsettings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=st.text(max_size=60) | st.text(alphabet="\"'*:|&!()<>-^~\\ 茶tea", max_size=30))
def test_any_text_as_query_never_raises(client: MemoryClient, query: str) -> None:
    """Any unicode (combining marks, surrogates-free controls, RTL, emoji) and every
    operator character of both query syntaxes, in any arrangement."""
    hits = client.recall(query, "bot", "ann")
    assert all(h.user_id == "ann" for h in hits)
    client.build_context(query, "bot", "ann", token_budget=200)


def test_retired_memories_never_appear(settings: Settings, db: Session) -> None:
    for status in (
        MemoryStatus.SUPERSEDED,
        MemoryStatus.ARCHIVED,
        MemoryStatus.EXPIRED,
        MemoryStatus.DELETED,
    ):
        make_memory(db, settings, f"Likes oolong tea ({status})", status=status)
    make_memory(db, settings, "Likes oolong tea now")
    db.commit()
    hits = MemoryClient(settings).recall("oolong tea", "bot", "ann")
    assert [h.content for h in hits] == ["Likes oolong tea now"]


def test_filters_by_category_and_tier(
    client: MemoryClient, settings: Settings, db: Session
) -> None:
    make_memory(
        db,
        settings,
        "Tea ceremony notes: https://example.com/tea",
        category=Category.REFERENCE,
        confidence=0.7,
    )
    db.commit()
    refs = client.recall("tea", "bot", "ann", categories=["reference"])
    assert [h.category for h in refs] == ["reference"]
    shorts = client.recall("tea", "bot", "ann", tiers=["short"])
    assert [h.tier for h in shorts] == ["short"]


def test_recalled_three_times_then_promoted(settings: Settings, db: Session) -> None:
    memory = make_memory(db, settings, "Plays the cello on weekends", confidence=0.7)
    db.commit()
    assert memory.tier == "short"
    client = MemoryClient(settings)
    for _ in range(settings.memories.promote_access_count):
        assert client.recall("cello", "bot", "ann", session_id="s1")[0].id == memory.id
    assert run_cycle(settings).promoted == 1
    assert client.get("bot", "ann", memory.id).tier == "long"
    kinds = [e.kind for e in client.history("bot", "ann", memory.id)]
    assert kinds == ["created", "promoted"]


def test_mark_referenced_reinforces_what_the_reply_used(settings: Settings, db: Session) -> None:
    make_memory(db, settings, "Allergic to peanuts")
    make_memory(db, settings, "Allergic to cats")
    db.commit()
    client = MemoryClient(settings)
    hits = client.recall("allergic", "bot", "ann", session_id="s1")
    assert len(hits) == 2
    used = client.mark_referenced(
        "Since you're allergic to peanuts, skip the satay.", hits, session_id="s1"
    )
    peanut = next(h for h in hits if "peanuts" in h.content)
    assert used == [peanut.id]


# ---------------------------------------------------------------------------------- isolation

scope_ids = st.sampled_from(["ann", "bob", "*"])
agent_ids = st.sampled_from(["bot", "other"])


@hsettings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(
        st.tuples(agent_ids, scope_ids, st.sampled_from(list(FACTS.values()))),
        min_size=1,
        max_size=8,
    ),
    reader=st.tuples(agent_ids, st.sampled_from(["ann", "bob"])),
    query=st.sampled_from(["tea", "龙井", "", "editor vim", "Lisbon"]),
)
def test_no_read_path_crosses_scopes(settings: Settings, db: Session, rows, reader, query) -> None:
    from tests.conftest import empty_tables

    if settings.storage.resolved_database_url.startswith("postgresql"):
        empty_tables(settings.storage.resolved_database_url)
    else:
        db.execute(Memory.__table__.delete())  # type: ignore[attr-defined]
        db.commit()
    ids = [make_memory(db, settings, content, agent_id=a, user_id=u).id for a, u, content in rows]
    db.commit()
    agent, user = reader
    allowed = {
        mid for mid, (a, u, _c) in zip(ids, rows, strict=True) if a == agent and u in (user, "*")
    }
    client = MemoryClient(settings)
    seen = {h.id for h in client.recall(query, agent, user, k=50)}
    seen |= {m.id for m in client.list(agent, user, limit=500)}
    tool = client.execute_tool(agent, user, "memory_recall", {"query": query or "x", "limit": 20})
    seen |= {m["id"] for m in tool["memories"]}
    assert seen <= allowed
    for mid in ids:
        if mid in allowed:
            assert client.get(agent, user, mid).id == mid
        else:
            with pytest.raises(Exception, match="no memory"):
                client.get(agent, user, mid)


def test_how_recently_a_memory_was_said_breaks_ties_not_matches(
    settings: Settings, db: Session
) -> None:
    """A conversation picks up where it left off: of two memories that match about as
    well, the one said this week comes first. But a memory that matches clearly better
    stays first however long ago it was said: recency's share (0.1), with the newer
    memory's less decayed weight, stays below what one place in every list is worth
    (second place scores 6/7 of first). The test fails for a share below 0.08 and from
    0.135; at 0.4 halving every 7 days RealMem's hit@5 gained 2.9 points, and the
    peanut cookie came first."""
    now = utcnow()
    said = {
        "allergy": ("Allergic to peanuts: a severe peanut allergy", 300),
        "cookie": ("Tried a peanut butter cookie recipe with the kids", 2),
        "flights": ("Beijing trip: flights booked for the trip to Beijing", 40),
        "hotel": ("Beijing trip: hotel booked near the Forbidden City", 2),
    }
    ids = {
        name: make_memory(db, settings, text, now=now - timedelta(days=days)).id
        for name, (text, days) in said.items()
    }
    db.commit()
    ann = Scope("bot", "ann")

    def first(query: str) -> int:
        return recall(db, settings, ann, query, k=1, now=now)[0].id

    assert first("Am I allergic to peanuts?") == ids["allergy"]
    assert first("What is next for the Beijing trip?") == ids["hotel"]


def test_one_conversations_memories_leave_room_for_another(settings: Settings, db: Session) -> None:
    """A trip planned in one chat left five memories that all say "Japan trip"; the chat
    where it was postponed, weeks before, is another. By score alone the planning chat
    fills the list; spread over conversations (each memory gives up 0.25 for each of its
    chat above it), the list shows the best of each chat first."""
    now = utcnow()
    planning = [
        "Japan trip: flights booked to Tokyo for the Japan trip",
        "Japan trip: hotel in Kyoto for the Japan trip",
        "Japan trip budget is 3000 euros for the whole Japan trip",
        "Japan trip: buy a rail pass before the Japan trip",
        "Japan trip: visit the deer park in Nara on the Japan trip",
    ]
    for text in planning:  # one batch: said at one moment
        make_memory(db, settings, text, now=now - timedelta(days=3))
    postponed = make_memory(
        db, settings, "The Japan trip is postponed to spring", now=now - timedelta(days=40)
    ).id
    db.commit()
    ann = Scope("bot", "ann")

    def listed(spread: float) -> list[int]:
        ranked = recall(db, settings.updated(rank_spread=spread), ann, "Japan trip?", k=3, now=now)
        return [hit.id for hit in ranked]

    assert postponed not in listed(0.0)
    hits = recall(db, settings, ann, "Japan trip?", k=3, now=now)
    assert [hit.id for hit in hits][1] == postponed
    assert [hit.parts.spread for hit in hits] == [0.0, 0.0, 0.25]
    assert hits[1].score < hits[2].score  # each shows its own score
    # A context block of two keeps that order.
    agent_config.put(db, "bot", AgentSettings(inject_max_items=2), now)
    db.commit()
    block = MemoryClient(settings, dispatch=False).build_context("Japan trip?", "bot", "ann")
    assert "postponed to spring" in block and block.count("[user]") == 2
    # What extraction shows the model beside a chat is that chat's own, by score alone.
    related = candidates.related(db, settings, ann, "Japan trip?", k=3)
    assert postponed not in [memory.id for memory in related]


@pytest.mark.parametrize(
    ("earlier", "latest", "dialogue"),
    [
        (
            "Keeps bees",
            "Has a cello teacher on Sundays",
            "<Ann>: my bees were busy today\n<Bot>: how lovely\n<Ann>: later I had my cello lesson",
        ),
        (
            "养蜜蜂",
            "周日学琴",
            "<Ann>：我家的蜜蜂今天很忙\n<Bot>：真好\n<Ann>：后来学琴",
        ),
    ],
)
def test_a_dialogues_last_line_weighs_more_among_its_keywords(
    settings: Settings, db: Session, earlier: str, latest: str, dialogue: str
) -> None:
    """A pasted dialogue is answered at its last line. Of two memories that each match one
    of its words, the one its last line names ranks first, though the other is shorter
    (BM25's favourite) and newer; weighing every term alike, the other would. A batch's
    turns, which extraction searches with, are not a question: their lines weigh alike."""
    now = utcnow()
    named_last = make_memory(db, settings, latest, now=now - timedelta(days=2)).id
    named_first = make_memory(db, settings, earlier, now=now - timedelta(days=1)).id
    db.commit()

    def first(settings: Settings) -> int:
        return MemoryClient(settings, dispatch=False).recall(dialogue, "bot", "ann", k=1)[0].id

    assert first(settings) == named_last
    assert first(settings.updated(keyword_last_line_weight=0.0)) == named_first
    related = candidates.related(db, settings, Scope("bot", "ann"), dialogue, k=1)
    assert [memory.id for memory in related] == [named_first]


@pytest.mark.parametrize(
    "earlier",
    [
        # past the characters a query is read to
        "\n".join(["<Ann>: nothing much happened today", "<Bot>: I see"] * 120),
        # past the terms a query keeps: 400 characters, each a term and a pair with the next
        "\n".join(
            "<Ann>：" + "".join(chr(0x4E00 + i) for i in range(n, n + 40))
            for n in range(0, 400, 40)
        ),
    ],
)
def test_a_long_dialogue_is_searched_by_its_last_line(
    settings: Settings, db: Session, earlier: str
) -> None:
    """However long the conversation pasted as the question, its last line, what the
    answer speaks to, is searched: the terms of the start are the ones left out."""
    cello = make_memory(db, settings, "Has a cello teacher on Sundays 周日学琴").id
    db.commit()
    for last in ("<Ann>: later I had my cello lesson", "<Ann>：后来学琴"):
        hits = recall(db, settings, Scope("bot", "ann"), f"{earlier}\n{last}", k=3, now=utcnow())
        assert cello in [hit.id for hit in hits], last
