"""Optional embeddings: stored when configured, used as a third ranking, never required."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.models.tables import Memory
from memoryd.settings import Settings
from tests import fakellm
from tests.conftest import with_llm
from tests.fakellm import FakeLLM


def test_embeddings_are_stored_and_ranked(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm, embedding_model="text-embedding-3-small")
    client = MemoryClient(s)
    client.remember("bot", "ann", "Prefers green tea in the morning")
    client.remember("bot", "ann", "Lives in Lisbon")
    vectors = db.scalars(select(Memory.embedding)).all()
    db.commit()
    assert all(v and len(v) == fakellm.EMBEDDING_DIMS for v in vectors)
    hit = client.recall("green tea", "bot", "ann")[0]
    assert hit.content == "Prefers green tea in the morning"
    assert hit.parts.embedding is not None and hit.parts.embedding > 0.5
    assert any(r.get("input") == ["green tea"] for r in fake_llm.requests)


def test_recall_works_when_the_embeddings_endpoint_fails(
    settings: Settings, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm, embedding_model="text-embedding-3-small", llm_retries=0)
    client = MemoryClient(s)
    fake_llm.push(fakellm.server_error())  # the memory's own embedding fails
    client.remember("bot", "ann", "Prefers green tea in the morning")
    fake_llm.push(fakellm.server_error())  # and so does the query's
    hit = client.recall("green tea", "bot", "ann")[0]
    assert hit.content == "Prefers green tea in the morning"
    assert hit.parts.embedding is None


def test_off_by_default(settings: Settings, db: Session) -> None:
    MemoryClient(settings).remember("bot", "ann", "Prefers green tea")
    assert db.scalars(select(Memory.embedding)).all() == [None]
