"""Seed 003 §3.3's injection rules: no block for short queries, none before a session's
first reply, long-term memories only for queries naming a trigger keyword."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from sqlalchemy.orm import Session

from memoryd.agents import config
from memoryd.agents.config import AgentSettings
from memoryd.client import MemoryClient
from memoryd.models.db import session_scope, utcnow
from memoryd.settings import Settings
from tests.factories import make_memory


def client_with(settings: Settings, **rules: object) -> MemoryClient:
    client = MemoryClient(settings.updated(**rules), dispatch=False)
    client.remember("bot", "ann", "Likes green tea")
    return client


def say(client: MemoryClient, session_id: str, role: str, content: str) -> None:
    client.enqueue_turn(
        agent_id="bot", user_id="ann", session_id=session_id, role=role, content=content
    )


def test_a_query_under_the_minimum_length_gets_no_block(settings: Settings) -> None:
    client = client_with(settings, inject_min_query_length=8)
    assert client.build_context("tea", "bot", "ann") == ""
    assert client.build_context("  tea?     ", "bot", "ann") == ""  # spaces do not count
    assert "Likes green tea" in client.build_context("green tea?", "bot", "ann")
    assert "Likes green tea" in client_with(settings).build_context("tea", "bot", "ann")


def test_no_block_before_the_sessions_first_reply(settings: Settings) -> None:
    client = client_with(settings, inject_first_round_empty=True)
    assert client.build_context("green tea", "bot", "ann", session_id="s1") == ""
    say(client, "s1", "user", "Hi, what tea should I buy?")  # stored before asking, or not
    assert client.build_context("green tea", "bot", "ann", session_id="s1") == ""
    say(client, "s1", "assistant", "Hello! Let me think.")
    assert "Likes green tea" in client.build_context("green tea", "bot", "ann", session_id="s1")
    assert client.build_context("green tea", "bot", "ann", session_id="s2") == ""  # a new one
    # A call that names no session cannot be placed in one: the rule does not apply.
    assert "Likes green tea" in client.build_context("green tea", "bot", "ann")


def test_long_term_memories_only_for_a_trigger_keyword(settings: Settings, db: Session) -> None:
    client = client_with(settings, inject_long_term_triggers=("Deploy", "部署"))
    make_memory(db, settings, "Tea tasting on Friday", confidence=0.7)  # short tier
    db.commit()
    block = client.build_context("green tea tasting", "bot", "ann")
    assert "Tea tasting on Friday" in block and "Likes green tea" not in block
    for query in ("green tea tasting before the deploy", "部署前喝什么 green tea tasting"):
        block = client.build_context(query, "bot", "ann")
        assert "Tea tasting on Friday" in block and "Likes green tea" in block
    # Only long-tier memories allowed and no trigger: nothing to inject.
    only_long = client_with(settings, inject_long_term_triggers=("deploy",), inject_tiers=("long",))
    assert only_long.build_context("green tea tasting", "bot", "ann") == ""


def test_the_rules_are_per_agent(settings: Settings) -> None:
    client = client_with(settings)
    client.remember("other", "ann", "Likes green tea")
    with session_scope(settings.storage) as session:
        rules = AgentSettings(inject_min_query_length=50, inject_long_term_triggers=[" x "])
        config.put(session, "bot", rules, utcnow())
        effective = config.describe(session, settings, "bot").effective
    assert (effective["inject_min_query_length"], effective["inject_long_term_triggers"]) == (
        50,
        ("x",),
    )
    assert client.build_context("green tea", "bot", "ann") == ""
    assert "Likes green tea" in client.build_context("green tea", "other", "ann")
    with pytest.raises(ValidationError, match="inject_long_term_triggers"):
        AgentSettings(inject_long_term_triggers=["deploy", "  "])
