"""A question about the present prefers the newest active value of a subject key."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.orm import Session

from memoryd.memories.store import set_content
from memoryd.models.db import utcnow
from memoryd.models.keys import Scope
from memoryd.recall.intent import asks_about_now
from memoryd.recall.rank import recall
from memoryd.settings import Settings
from tests.factories import make_memory


def test_now_prefers_the_newest_value_of_a_key(settings: Settings, db: Session) -> None:
    """Two active values of one key (a change no model reconciled): the older matches
    the question's words better, the newer is what "now" asks for."""
    old = make_memory(db, settings, "Lives in Berlin, loves living in Berlin")
    new = make_memory(db, settings, "Moved to Lisbon")
    for memory, days in ((old, 90), (new, 2)):
        set_content(memory, memory.content, "home city")
        memory.said_at = utcnow() - timedelta(days=days)
    db.commit()
    ann = Scope("bot", "ann")
    plain = recall(db, settings, ann, "where does she live, Berlin?", k=2, now=utcnow())
    assert [h.id for h in plain] == [old.id, new.id]
    now = recall(db, settings, ann, "where does she live now, Berlin?", k=2, now=utcnow())
    assert [h.id for h in now] == [new.id, old.id]


def test_the_words_that_ask_about_the_present() -> None:
    assert all(map(asks_about_now, ["Where does Ali live now?", "她现在住哪", "目前在哪工作"]))
    assert not any(map(asks_about_now, ["Where did Ali live in 2020?", "knowledge", "她以前住哪"]))


@pytest.mark.parametrize("others", [200, 20])
def test_a_question_in_a_keys_words_finds_that_keys_memories(
    settings: Settings, db: Session, others: int
) -> None:
    """The subject key is searched with the content: "who is my team lead?" finds the
    memory keyed "team lead" whose text names only the person; "住在哪里" finds the
    one keyed "home city" through its slot's words. In a large scope by the key index,
    in a small one, read whole, from its rows."""
    lead = make_memory(db, settings, "Jürgen Bauer since the reorg")
    city = make_memory(db, settings, "杭州")
    set_content(lead, lead.content, "team lead")
    set_content(city, city.content, "home city")
    for n in range(others):  # a scope of other memories, some sharing the question's words
        make_memory(db, settings, f"Team offsite idea {n}: a lead climbing day in a city")
    db.commit()
    ann = Scope("bot", "ann")
    for question in ("Who is my team lead?", "Who is my manager?", "我的组长是谁？"):
        assert recall(db, settings, ann, question, k=1, now=utcnow())[0].id == lead.id, question
    assert recall(db, settings, ann, "用户住在哪里？", k=1, now=utcnow())[0].id == city.id


def _first(db: Session, settings: Settings, question: str) -> int:
    return recall(db, settings, Scope("bot", "ann"), question, k=1, now=utcnow())[0].id


def test_a_when_question_prefers_the_dated_episode(settings: Settings, db: Session) -> None:
    from datetime import UTC, datetime

    from memoryd.models.tables import Category

    plans = make_memory(
        db, settings, "Training plan: run the Berlin marathon again, the Berlin marathon in 2027"
    )
    ran = make_memory(
        db,
        settings,
        "Ran the Berlin marathon",
        category=Category.EPISODE,
        occurred_at=datetime(2026, 4, 12, tzinfo=UTC),
    )
    db.commit()
    assert _first(db, settings, "the Berlin marathon training plan") == plans.id
    assert _first(db, settings, "When did I run the Berlin marathon?") == ran.id


def test_a_question_on_how_to_behave_prefers_feedback(settings: Settings, db: Session) -> None:
    from memoryd.models.tables import Category

    topic = make_memory(db, settings, "Replies about the user's reply-all email etiquette talk")
    rule = make_memory(db, settings, "Reply in short bullet points", category=Category.FEEDBACK)
    db.commit()
    assert _first(db, settings, "reply etiquette") == topic.id
    assert _first(db, settings, "How should you reply to me about etiquette?") == rule.id


def test_a_question_naming_a_person_prefers_that_persons_memories(
    settings: Settings, db: Session
) -> None:
    own = make_memory(db, settings, "Works as a nurse in Leeds, works nights in Leeds")
    sister = make_memory(db, settings, "Works in Leeds")
    set_content(own, own.content, "job title")
    set_content(sister, sister.content, "sister anna job title")
    db.commit()
    assert _first(db, settings, "Who works in Leeds?") == own.id
    assert _first(db, settings, "Where does my sister work, Leeds?") == sister.id
    assert _first(db, settings, "What does Anna do, works in Leeds?") == sister.id
