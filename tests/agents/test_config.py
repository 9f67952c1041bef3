"""Per-agent settings change what recall, context and extraction do for that agent only."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.agents import config
from memoryd.agents.config import AgentSettings
from memoryd.client import MemoryClient
from memoryd.extraction.batch import extract_session
from memoryd.models.db import session_scope, utcnow
from memoryd.models.keys import SessionKey
from memoryd.models.tables import Category, ExtractionBatch, Memory, Tier
from memoryd.settings import Settings
from tests.factories import add_turns, count_turns


def set_agent(settings: Settings, agent_id: str, **values: object) -> None:
    with session_scope(settings.storage) as session:
        config.put(session, agent_id, AgentSettings.model_validate(values), utcnow())


def test_defaults_come_from_settings_and_overrides_replace_them(settings: Settings) -> None:
    set_agent(settings, "bot", prefetch_limit=3)
    with session_scope(settings.storage, readonly=True) as session:
        described = config.describe(session, settings, "bot")
        other = config.describe(session, settings, "other")
    assert described.effective["prefetch_limit"] == 3
    assert described.effective["context_token_budget"] == settings.agent.context_token_budget
    assert other.effective["prefetch_limit"] == settings.extraction.prefetch_limit
    assert described.overrides.context_token_budget is None


def test_recall_and_context_follow_the_agents_settings(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    for text, category in [
        ("Vegetarian cook", Category.USER),
        ("Cook the project report on Friday", Category.PROJECT),
        ("Cook pasta for the team", Category.EPISODE),
    ]:
        client.remember("bot", "ann", text, category=category)
        client.remember("other", "ann", text, category=category)
    assert len(client.recall("cook", "bot", "ann")) == 3

    set_agent(settings, "bot", prefetch_limit=1)
    assert len(client.recall("cook", "bot", "ann")) == 1
    assert len(client.recall("cook", "other", "ann")) == 3  # only that agent changed

    set_agent(settings, "bot", memory_categories=["user", "project"])
    assert {h.category for h in client.recall("cook", "bot", "ann")} == {"user", "project"}
    assert client.recall("cook", "bot", "ann", categories=["episode"]) == []
    block = client.build_context("cook", "bot", "ann")
    assert "Vegetarian" in block and "pasta" not in block

    set_agent(settings, "bot", inject_max_items=1)
    assert client.build_context("cook", "bot", "ann").count("[") == 1

    set_agent(settings, "bot", inject_min_score=99)
    assert client.build_context("cook", "bot", "ann") == ""

    set_agent(settings, "bot", memory_enabled=False)
    assert client.recall("cook", "bot", "ann") == []
    assert client.build_context("cook", "bot", "ann") == ""
    assert len(client.recall("cook", "other", "ann")) == 3


def test_extraction_keeps_the_agents_categories_and_skips_a_disabled_agent(
    settings: Settings, db: Session
) -> None:
    set_agent(settings, "bot", memory_categories=["feedback"])
    client = MemoryClient(settings, dispatch=False)
    add_turns(settings, 1, content="Please remember that I am vegetarian.")
    client.end_session("bot", "ann", "s1")
    stats = extract_session(settings, SessionKey("bot", "ann", "s1"))
    # The fact the rules read (the diet it states) is the user's.
    assert (stats.batches, stats.created, stats.rejected) == (1, 0, 1)
    batch = db.scalars(select(ExtractionBatch)).one()
    assert batch.rejections == {"category": 1}

    set_agent(settings, "quiet", memory_enabled=False)
    add_turns(settings, 2, agent_id="quiet", content="Remember that I like tea.")
    client.end_session("quiet", "ann", "s1")
    stats = extract_session(settings, SessionKey("quiet", "ann", "s1"))
    assert (stats.batches, stats.turns, stats.created) == (1, 2, 0)
    assert count_turns(db, "pending") == 0  # nothing piles up
    db.commit()
    extractors = db.scalars(select(ExtractionBatch.extractor).order_by(ExtractionBatch.id)).all()
    assert extractors == ["offline", "disabled"]
    assert db.scalars(select(Memory)).all() == []


def test_injected_tiers_leave_short_term_memories_out_of_context(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    client.remember("bot", "ann", "Vegetarian cook")
    with session_scope(settings.storage) as session:
        session.execute(Memory.__table__.update().values(tier=Tier.SHORT))  # type: ignore[attr-defined]
    set_agent(settings, "bot", inject_tiers=["long"])
    assert client.build_context("cook", "bot", "ann") == ""
    assert len(client.recall("cook", "bot", "ann")) == 1  # recall itself is not limited


@pytest.mark.parametrize("trigger", ["de\x00ploy", "deploy \ud800"])
def test_a_trigger_keyword_with_nul_or_a_lone_surrogate_is_refused(trigger: str) -> None:
    with pytest.raises(ValidationError) as caught:
        AgentSettings.model_validate({"inject_long_term_triggers": ["release", trigger]})
    assert caught.value.errors()[0]["loc"] == ("inject_long_term_triggers", 1)
