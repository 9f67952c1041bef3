"""What a model answers is checked like input, item by item: a fact or profile update
with a NUL, a lone surrogate, a control character or a shape the schema refuses costs
that item, counted on the batch by reason, never the batch; and a fact the database
itself refuses costs that fact alone. At temperature 0 the same answer comes back on
every retry, so failing the batch would fail it until its turns were dead-lettered."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.extraction.answers import ExtractionOutput
from memoryd.extraction.batch import extract_session
from memoryd.memories.profiles import load
from memoryd.models.db import session_scope
from memoryd.models.keys import Scope, SessionKey
from memoryd.models.profiles import ProfileType
from memoryd.models.tables import BatchStatus, ExtractionBatch, Memory, Turn
from memoryd.settings import Settings
from testkit.fakellm import FakeLLM, answer
from tests.conftest import with_llm

KEY = SessionKey("bot", "ann", "s")


def extract(settings: Settings, llm: FakeLLM, reply: dict[str, Any]) -> None:
    """One session of two turns, extracted with `reply` as the model's whole answer."""
    s = with_llm(settings, llm)
    llm.push(answer(reply))
    client = MemoryClient(s, dispatch=False)
    for line in ("Hi, Sam here.", "I live in Porto and I drink tea."):
        client.enqueue_turn(
            agent_id=KEY.agent_id,
            user_id=KEY.user_id,
            session_id=KEY.session_id,
            role="user",
            content=line,
        )
    client.end_session(KEY.agent_id, KEY.user_id, KEY.session_id)
    extract_session(s, KEY)


def outcome(db: Session) -> tuple[ExtractionBatch, list[str], list[str]]:
    """The batch, the memories' contents and the turns' states."""
    batch = db.scalars(select(ExtractionBatch)).one()
    memories = sorted(m.content for m in db.scalars(select(Memory)))
    return batch, memories, [t.status for t in db.scalars(select(Turn))]


def fact(content: str, **extra: Any) -> dict[str, Any]:
    return {"content": content, "confidence": 0.9, **extra}


def test_a_bad_string_costs_its_item_alone(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    extract(
        settings,
        fake_llm,
        {
            "facts": [
                fact("Lives in Porto"),
                fact("Drinks\x00 tea"),
                fact("Likes jazz", tags=["music\ud800"]),
                fact("Works at Acme", name="employer\x07"),
                fact("Has a dog", detail={"breed\x1b": "collie"}),
            ],
            "experiences": [{"pain": "Slow\x00 builds", "solution": "cache", "confidence": 0.9}],
            "profile_updates": [
                {
                    "profile": "user",
                    "op": "set",
                    "path": "occupation",
                    "value": "nurse",
                    "confidence": 0.9,
                },
                {
                    "profile": "user",
                    "op": "set",
                    "path": "preferences.location_preference",
                    "value": "Por\x00to",
                    "confidence": 0.9,
                },
            ],
        },
    )
    batch, memories, turns = outcome(db)
    assert batch.status == BatchStatus.DONE and turns == ["done", "done"]
    assert memories == ["Lives in Porto"]
    assert batch.rejections == {"invalid_text": 5, "profile_invalid_text": 1}
    assert (batch.facts_proposed, batch.facts_accepted, batch.facts_rejected) == (6, 1, 6)
    assert batch.llm_calls == 1  # no repair round: the answer itself was fine
    with session_scope(settings.storage) as session:
        assert load(session, Scope("bot", "ann"), ProfileType.USER).content["occupation"] == "nurse"


def test_a_malformed_item_costs_its_item_alone(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    extract(
        settings,
        fake_llm,
        {
            "facts": [
                fact("Lives in Porto"),
                fact("Drinks tea", confidence=2),
                {"confidence": 0.9},
                "not an object",
                fact("Has a dog", detail={"weight": float("inf")}),
            ],
            "profile_updates": [
                {"profile": "user", "op": "set", "path": "Bad Path", "value": "x", "confidence": 1},
            ],
        },
    )
    batch, memories, turns = outcome(db)
    assert batch.status == BatchStatus.DONE and turns == ["done", "done"]
    assert memories == ["Lives in Porto"]
    assert batch.rejections == {"invalid_fact": 4, "profile_invalid_update": 1}
    assert batch.llm_calls == 1


REFUSE = """
CREATE FUNCTION refuse_marked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.content LIKE '%tea%' THEN
    RAISE EXCEPTION 'value refused' USING ERRCODE = '22023';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER refuse_marked BEFORE INSERT ON memories
  FOR EACH ROW EXECUTE FUNCTION refuse_marked();
"""


def test_a_fact_the_database_refuses_costs_that_fact_alone(
    backend: str, settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    if backend != "postgres":
        pytest.skip("a trigger raising a data exception (SQLSTATE class 22) is PostgreSQL's")
    with session_scope(settings.storage) as session:
        session.execute(text(REFUSE))
    try:
        extract(
            settings,
            fake_llm,
            {
                "facts": [
                    fact("Lives in Porto"),
                    fact("Drinks tea"),
                    fact("Called Sam", name="name"),
                ]
            },
        )
    finally:  # the database outlives the test
        with session_scope(settings.storage) as session:
            session.execute(text("DROP TRIGGER refuse_marked ON memories"))
            session.execute(text("DROP FUNCTION refuse_marked()"))
    batch, memories, turns = outcome(db)
    assert batch.status == BatchStatus.DONE and turns == ["done", "done"]
    assert memories == ["Called Sam", "Lives in Porto"]
    assert batch.rejections == {"refused_by_database": 1}
    assert (batch.memories_created, batch.facts_accepted) == (2, 3)


def test_a_value_nested_past_what_can_be_walked_costs_its_item() -> None:
    deep: Any = "x"
    for _ in range(700):
        deep = {"a": deep}
    output = ExtractionOutput.model_validate(
        {
            "facts": [fact("Lives in Porto")],
            "profile_updates": [
                {"profile": "user", "op": "set", "path": "occupation", "value": deep}
                | {"confidence": 1}
            ],
        }
    )
    assert [f.content for f in output.facts] == ["Lives in Porto"]
    assert output.profile_updates == [] and output.dropped == {"profile_invalid_text": 1}


def test_tags_past_the_limits_are_dropped_not_the_fact(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    """A model's tags within the limits the HTTP API keeps (50 of 100 characters at
    most): three of 100,000 characters each were stored whole."""
    tags = ["t" * 100_000] * 3 + ["drinks", " ", 7] + [f"tag{n}" for n in range(60)]
    extract(settings, fake_llm, {"facts": [fact("Lives in Porto", tags=tags)]})
    memory = db.scalars(select(Memory)).one()
    assert memory.content == "Lives in Porto"
    assert memory.tags == ["drinks", *[f"tag{n}" for n in range(49)]]
