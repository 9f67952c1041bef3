"""Time: the extractor sees when each turn was said, episodes carry the day they happened,
and a fact said earlier never replaces one said later."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.extraction.batch import extract_session
from memoryd.extraction.prompt import (
    EXTRACT_PROMPT,
    MAX_INDEX,
    prompt_overhead,
    render_turn,
    today_line,
    turn_cost,
)
from memoryd.extraction.views import TurnView
from memoryd.ingest.sweeper import retry_failed
from memoryd.models.db import session_scope, utcnow
from memoryd.models.keys import SessionKey
from memoryd.models.tables import Category, ExtractionBatch, Memory, MemoryStatus, Turn
from memoryd.prompts import load_prompt
from memoryd.settings import Settings
from memoryd.text import estimate_tokens
from testkit import fakellm
from testkit.fakellm import FakeLLM, answer
from tests.conftest import with_llm


def say(settings: Settings, session: str, *turns: tuple[str, str]) -> SessionKey:
    """User turns (ISO timestamp, content) of one session, which then ends."""
    client = MemoryClient(settings, dispatch=False)
    for timestamp, content in turns:
        client.enqueue_turn(
            agent_id="bot",
            user_id="ann",
            session_id=session,
            role="user",
            content=content,
            timestamp=timestamp,
        )
    client.end_session("bot", "ann", session)
    return SessionKey("bot", "ann", session)


def memories(db: Session) -> list[Memory]:
    rows = list(db.scalars(select(Memory).order_by(Memory.id)))
    db.commit()
    return rows


def test_the_extractor_sees_when_each_turn_was_said(settings: Settings, fake_llm: FakeLLM) -> None:
    s = with_llm(settings, fake_llm)
    key = say(
        s,
        "s1",
        ("2026-11-02T14:05:00Z", "I ran a half marathon on Sunday."),
        ("2026-11-03T09:30:00Z", "My knee hurts since yesterday."),
    )
    extract_session(s, key)
    prompt = fake_llm.requests[0]["messages"][1]["content"]
    assert "Today is Tuesday 2026-11-03; turn times are UTC+00:00." in prompt
    assert '[1] 2026-11-02 14:05 user: "I ran a half marathon on Sunday."' in prompt
    assert '[2] 2026-11-03 09:30 user: "My knee hurts since yesterday."' in prompt

    # In the user's timezone, when their profile names one: 20:00 UTC is 04:00 in Shanghai.
    MemoryClient(s).patch_profile("bot", "ann", "user", {"timezone": "Asia/Shanghai"})
    extract_session(s, say(s, "s2", ("2026-11-03T20:00:00Z", "Good morning!")))
    prompt = fake_llm.requests[1]["messages"][1]["content"]
    assert "Today is Wednesday 2026-11-04; turn times are UTC+08:00." in prompt
    assert '[1] 2026-11-04 04:00 user: "Good morning!"' in prompt


zones = st.one_of(
    st.integers(min_value=-12 * 60, max_value=14 * 60).map(
        lambda m: timezone(timedelta(minutes=m))
    ),
    st.just(UTC),
)
moments = st.datetimes(
    min_value=datetime(1000, 1, 1), max_value=datetime(9998, 12, 31), timezones=st.just(UTC)
)


@given(
    role=st.sampled_from(["user", "assistant", "system", "tool"]),
    content=st.text(max_size=300),
    at=moments,
    index=st.integers(min_value=1, max_value=MAX_INDEX),
    zone=zones,
)
def test_a_turns_cost_covers_it_at_any_time_in_any_zone(
    role: str, content: str, at: datetime, index: int, zone: timezone
) -> None:
    """Batches are cut by turn_cost before the prompt is rendered: the rendered line must
    never cost more, or a batch could overflow the model's context."""
    line = render_turn(index, TurnView(role, content, at), zone)
    assert estimate_tokens(line) + 1 <= turn_cost(role, content)


@given(at=moments, zone=zones)
def test_the_date_line_fits_the_prompt_overhead(at: datetime, zone: timezone) -> None:
    messages = load_prompt(EXTRACT_PROMPT).render(
        turns="",
        memories="(none yet)",
        keys="(none yet)",
        profiles="(none yet)",
        today=today_line([TurnView("user", "hi", at)], zone),
    )
    assert sum(estimate_tokens(m["content"]) + 4 for m in messages) <= prompt_overhead()


def test_a_time_the_users_zone_cannot_carry_is_shown_in_utc() -> None:
    """9999-12-31 23:00 UTC is past year 9999 in UTC+8: the prompt shows it in UTC rather
    than fail the batch with an OverflowError."""
    last = TurnView("user", "hi", datetime(9999, 12, 31, 23, tzinfo=UTC))
    first = TurnView("user", "hi", datetime(1, 1, 1, 1, tzinfo=UTC))
    east, west = timezone(timedelta(hours=8)), timezone(timedelta(hours=-8))
    assert today_line([last], east) == "Friday 9999-12-31; turn times are UTC+00:00"
    assert render_turn(1, last, east) == '[1] 9999-12-31 23:00 user: "hi"'
    assert render_turn(1, first, west).endswith('-01-01 01:00 user: "hi"')  # year 1, in UTC


def test_a_stored_extreme_timestamp_never_fails_the_batch(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    """A turn stored before ingest bounded timestamps, read in a profile's timezone."""
    s = with_llm(settings, fake_llm)
    MemoryClient(s).patch_profile("bot", "ann", "user", {"timezone": "Asia/Shanghai"})
    key = say(s, "s1", ("2026-11-02T10:00:00Z", "I ran a half marathon."))
    db.execute(update(Turn).values(created_at=datetime(9999, 12, 31, 23, tzinfo=UTC)))
    db.commit()
    stats = extract_session(s, key)
    assert (stats.batches, stats.dead_lettered) == (1, 0)
    prompt = fake_llm.requests[0]["messages"][1]["content"]
    assert '[1] 9999-12-31 23:00 user: "I ran a half marathon."' in prompt


# ------------------------------------------------------------------------------ episodes


def test_an_episode_carries_the_day_it_happened(settings: Settings, db: Session) -> None:
    """The offline rules date "yesterday" by the turn, in the user's timezone."""
    extract_session(
        settings, say(settings, "s1", ("2026-11-02T10:00:00Z", "Yesterday I ran a half marathon."))
    )
    MemoryClient(settings).patch_profile("bot", "ann", "user", {"timezone": "Asia/Shanghai"})
    # 20:00 UTC on 3 November is already the 4th in Shanghai: "yesterday" is the 3rd.
    extract_session(settings, say(settings, "s2", ("2026-11-03T20:00:00Z", "我昨天去了长城。")))
    got = [(m.category, m.content, m.occurred_at, m.said_at) for m in memories(db)]
    assert got == [
        (
            Category.EPISODE,
            "Ran a half marathon on 2026-11-01",
            datetime(2026, 11, 1, tzinfo=UTC),
            datetime(2026, 11, 2, 10, tzinfo=UTC),
        ),
        (
            Category.EPISODE,
            "2026-11-03去了长城",
            datetime(2026, 11, 3, tzinfo=UTC),
            datetime(2026, 11, 3, 20, tzinfo=UTC),
        ),
    ]


def test_a_bad_date_from_the_model_costs_only_the_date(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm)
    fake_llm.push(
        answer(
            {
                "facts": [
                    {
                        "content": "Ran a half marathon",
                        "category": "episode",
                        "confidence": 0.9,
                        "occurred_at": "last Sunday",
                    },
                    {
                        "content": "Moved to Porto",
                        "category": "episode",
                        "confidence": 0.9,
                        "occurred_at": "2026-10-30",
                    },
                    {
                        "content": "Adopted a cat",
                        "category": "episode",
                        "confidence": 0.9,
                        "occurred_at": "0001-01-01",
                    },
                ]
            }
        )
    )
    stats = extract_session(s, say(s, "s1", ("2026-11-02T10:00:00Z", "Lots happened.")))
    assert (stats.batches, stats.created) == (1, 3)
    assert [(m.content, m.occurred_at) for m in memories(db)] == [
        ("Ran a half marathon", None),
        ("Moved to Porto", datetime(2026, 10, 30, tzinfo=UTC)),
        ("Adopted a cat", None),
    ]
    batch = db.scalars(select(ExtractionBatch)).one()
    assert batch.rejections == {"invalid_occurred_at": 2}


def test_the_llm_path_stores_the_episode_date(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    """The model's occurred_at (here the fake's, read off the dated prompt) is kept."""
    s = with_llm(settings, fake_llm)
    extract_session(s, say(s, "s1", ("2026-11-02T10:00:00Z", "Yesterday I adopted a cat.")))
    (memory,) = memories(db)
    assert (memory.content, memory.occurred_at) == (
        "Adopted a cat on 2026-11-01",
        datetime(2026, 11, 1, tzinfo=UTC),
    )
    assert MemoryClient(s).get("bot", "ann", memory.id).occurred_at == memory.occurred_at


# --------------------------------------------------------------------------- replacement


def test_a_redriven_old_turn_never_replaces_a_newer_fact(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    """Berlin was said on 1 November but dead-lettered; Lisbon, said on the 5th, was
    extracted meanwhile. Re-driven, the Berlin turn proposes replacing Lisbon: Lisbon stays
    active, and Berlin is kept as history that Lisbon superseded."""
    s = with_llm(settings, fake_llm, max_attempts=1)
    berlin = say(s, "s1", ("2026-11-01T09:00:00Z", "I live in Berlin."))
    fake_llm.push(fakellm.bad_request())
    assert extract_session(s, berlin).dead_lettered == 1
    extract_session(s, say(s, "s2", ("2026-11-05T09:00:00Z", "I moved to Lisbon.")))

    with session_scope(s.storage) as session:
        assert retry_failed(session, utcnow()) == 1  # `memoryd retry`
    stats = extract_session(s, berlin)
    assert fakellm.parse_prompt(fake_llm.requests[-1]["messages"])[1]  # Lisbon was shown
    assert (stats.created, stats.superseded) == (1, 1)

    old, lisbon = sorted(memories(db), key=lambda m: m.content)
    assert (lisbon.content, lisbon.status) == ("Lives in Lisbon", MemoryStatus.ACTIVE)
    assert (old.content, old.status) == ("Lives in Berlin", MemoryStatus.SUPERSEDED)
    assert (old.superseded_by_id, lisbon.supersedes_id) == (lisbon.id, None)
    assert old.said_at == datetime(2026, 11, 1, 9, tzinfo=UTC)
    events = MemoryClient(s).history("bot", "ann", old.id)
    assert [e.kind for e in events] == ["created", "superseded"]
    assert events[1].detail == {"superseded_by": lisbon.id, "reason": "said before it"}
    assert [m.content for m in MemoryClient(s).list("bot", "ann")] == ["Lives in Lisbon"]


def test_a_later_turn_still_replaces_an_earlier_fact(settings: Settings, db: Session) -> None:
    extract_session(settings, say(settings, "s1", ("2026-11-01T09:00:00Z", "I live in Berlin.")))
    extract_session(settings, say(settings, "s2", ("2026-11-05T09:00:00Z", "I moved to Lisbon.")))
    by_content = {m.content: m for m in memories(db)}
    assert by_content["Lives in Berlin"].status == MemoryStatus.SUPERSEDED
    assert by_content["Lives in Lisbon"].status == MemoryStatus.ACTIVE
