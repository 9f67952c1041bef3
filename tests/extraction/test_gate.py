"""Confidence gating and secret filtering, and the reasons recorded on the batch row."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.extraction.batch import extract_session
from memoryd.extraction.gate import gate_facts
from memoryd.memories.proposals import Fact
from memoryd.models.keys import SessionKey
from memoryd.models.tables import ExtractionBatch, Memory
from memoryd.settings import Settings
from memoryd.text import holds_secret
from testkit.fakellm import FakeLLM, answer
from tests.conftest import with_llm


def fact(content: str, confidence: float = 0.9) -> Fact:
    return Fact(content=content, confidence=confidence)


@pytest.mark.parametrize(
    "text",
    [
        "My OpenAI key is sk-proj-abcdefghijklmnopqrstuvwx",
        "AWS id AKIAIOSFODNN7EXAMPLE",
        "token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "password: hunter2",
        "我的密码是 abc123",
        "card 4111 1111 1111 1111",
        "-----BEGIN RSA PRIVATE KEY-----",
    ],
)
def test_secrets_are_detected(text: str) -> None:
    assert holds_secret(text)


@pytest.mark.parametrize(
    "text",
    ["Prefers tea over coffee", "Order 1234 5678 shipped", "Phone 4111 1111 1111 1112"],
)
def test_ordinary_text_is_not_a_secret(text: str) -> None:
    assert not holds_secret(text)  # the last one fails the Luhn check


def test_gate_counts_each_reason(settings: Settings) -> None:
    s = settings.updated(**{"max_facts": 2, "min_confidence": 0.6})
    kept, rejected = gate_facts(
        [
            fact("Lives in Berlin"),
            fact("Maybe likes jazz", 0.3),
            fact("ok"),
            fact("x" * (s.extraction.max_fact_chars + 1)),
            fact("password is hunter2"),
            fact("Prefers tea"),
            fact("Works at ACME"),
        ],
        s.extraction,
    )
    assert [f.content for f in kept] == ["Lives in Berlin", "Prefers tea"]
    assert rejected == {
        "low_confidence": 1,
        "too_short": 1,
        "too_long": 1,
        "secret": 1,
        "over_max_facts": 1,
    }


def test_rejections_are_recorded_on_the_batch(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm)
    fake_llm.push(
        answer(
            {
                "facts": [
                    {"content": "Lives in Berlin", "confidence": 0.95},
                    {"content": "Might move to Rome", "confidence": 0.7, "temporary": "followup"},
                    {"content": "Probably likes jazz", "confidence": 0.2},
                    {"content": "API key is sk-abcdefghijklmnopqrstuvwxyz", "confidence": 0.99},
                ]
            }
        )
    )
    client = MemoryClient(s, dispatch=False)
    client.enqueue_turn(
        agent_id="bot", user_id="ann", session_id="s", role="user", content="some chat"
    )
    client.end_session("bot", "ann", "s")
    extract_session(s, SessionKey("bot", "ann", "s"))
    batch = db.scalars(select(ExtractionBatch)).one()
    assert (batch.facts_proposed, batch.facts_accepted, batch.facts_rejected) == (4, 2, 2)
    assert batch.rejections == {"low_confidence": 1, "secret": 1}
    tiers = {m.content: m.tier for m in db.scalars(select(Memory))}
    assert tiers == {"Lives in Berlin": "long", "Might move to Rome": "short"}
