"""The batch's one LLM call also fills the profiles and records experiences, gated and
written in the batch's transaction; the offline extractor fills the easy fields."""

from __future__ import annotations

import json

from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.extraction.batch import extract_session
from memoryd.models.keys import SessionKey
from memoryd.models.tables import Category, ExtractionBatch, Memory
from memoryd.settings import Settings
from testkit.fakellm import FakeLLM, answer
from tests.conftest import with_llm


def say(settings: Settings, *lines: str, session: str = "s1") -> SessionKey:
    client = MemoryClient(settings, dispatch=False)
    for line in lines:
        client.enqueue_turn(
            agent_id="bot", user_id="ann", session_id=session, role="user", content=line
        )
    client.end_session("bot", "ann", session)
    return SessionKey("bot", "ann", session)


def test_the_offline_extractor_fills_the_easy_profile_fields(settings: Settings) -> None:
    client = MemoryClient(settings)
    extract_session(
        settings, say(settings, "Call me Sam. My timezone is Europe/Lisbon.", "I work as a nurse.")
    )
    user = client.profile("bot", "ann", "user")
    assert user.content["custom_rules"] == ["Call the user Sam."]
    assert (user.content["timezone"], user.content["occupation"]) == ("Europe/Lisbon", "nurse")
    assert user.field_meta["timezone"].source == "extractor"
    assert client.profile("bot", "ann", "work").content["occupation"] == "nurse"
    # A new name replaces the old rule; history says who changed what.
    extract_session(settings, say(settings, "Actually, call me Samuel.", session="s2"))
    assert client.profile("bot", "ann", "user").content["custom_rules"] == ["Call the user Samuel."]
    assert [e.actor for e in client.profile_history("bot", "ann", "user")] == ["extractor"] * 2


def test_profiles_exist_from_a_scopes_first_batch(settings: Settings, db: Session) -> None:
    extract_session(settings, say(settings, "Nice weather today."))
    assert MemoryClient(settings).profile("bot", "ann", "work").version == 0
    from memoryd.models.tables import Profile

    assert sorted(db.scalars(select(Profile.type))) == ["user", "work"]


def test_one_llm_call_returns_facts_experiences_and_profile_updates(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm)
    MemoryClient(s).patch_profile("bot", "ann", "user", {"timezone": "Asia/Tokyo"})
    fake_llm.push(
        answer(
            {
                "facts": [{"content": "Has a cat named Miso", "confidence": 0.9}],
                "experiences": [
                    {
                        "pain": "Docker build fails behind the office proxy",
                        "solution": "set HTTPS_PROXY as a build arg",
                        "outcome": "the build passed",
                        "tags": ["docker"],
                        "confidence": 0.9,
                    }
                ],
                "profile_updates": [
                    {
                        "profile": "work",
                        "op": "add",
                        "path": "preferred_tools",
                        "value": "Docker",
                        "confidence": 0.9,
                    },
                    {
                        "profile": "user",
                        "op": "set",
                        "path": "timezone",
                        "value": "UTC",
                        "confidence": 0.7,
                    },
                    {
                        "profile": "user",
                        "op": "set",
                        "path": "occupation",
                        "value": "devops engineer",
                        "confidence": 0.3,
                    },
                ],
            }
        )
    )
    stats = extract_session(s, say(s, "The proxy fix worked, thanks!"))
    assert fake_llm.calls == 1  # everything in the batch's one call
    assert stats.created == 2
    experience = db.scalars(select(Memory).where(Memory.category == Category.EXPERIENCE)).one()
    assert experience.content.startswith("Docker build fails behind the office proxy: set")
    assert experience.metadata_ and experience.metadata_["experience"]["solution"] == (
        "set HTTPS_PROXY as a build arg"
    )
    batch = db.scalars(select(ExtractionBatch)).one()
    assert batch.profile_updates == 1
    assert batch.rejections == {"profile_kept_current": 1, "profile_low_confidence": 1}
    client = MemoryClient(s)
    assert client.profile("bot", "ann", "work").content["preferred_tools"] == ["Docker"]
    assert client.profile("bot", "ann", "user").content["timezone"] == "Asia/Tokyo"
    hits = client.recall("docker proxy", "bot", "ann", categories=["experience"])
    assert [h.id for h in hits] == [experience.id]
    request = json.dumps(fake_llm.requests[0]["messages"])
    assert "Asia/Tokyo" in request  # the model saw the current profile
