"""What each process keeps of embeddings: scope vectors that always match their
memories, within a byte budget, and one model per provider however many agents."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import Engine, event, select, update
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.models.db import get_engine, session_scope
from memoryd.models.keys import Scope
from memoryd.models.tables import Memory, MemoryStatus, VectorModel
from memoryd.recall import backfill, embeddings, scope_vectors, search
from memoryd.settings import Settings
from testkit.fakellm import FakeLLM
from tests.conftest import with_llm
from tests.factories import make_memory
from tests.recall.test_backfill import POISON

REMOTE = {"embedding_model": "text-embedding-3-small"}


def test_an_edited_memory_is_ranked_by_its_new_vector(
    settings: Settings, fake_llm: FakeLLM
) -> None:
    """The edit clears the vector and the fill writes a new one before the next recall:
    the scope's count and ids are as they were, its vectors are not."""
    s = with_llm(settings, fake_llm, **REMOTE)
    client = MemoryClient(s)
    memory = client.remember("bot", "ann", "Prefers green tea in the morning")
    client.remember("bot", "ann", "Walks the dog at noon")
    backfill.fill_missing(s)
    assert client.recall("green tea", "bot", "ann")[0].id == memory.id  # vectors now cached

    client.update("bot", "ann", memory.id, content="Plays the cello on Sundays")
    assert backfill.fill_missing(s) == 1
    hit = client.recall("cello on Sundays", "bot", "ann")[0]
    assert hit.id == memory.id
    assert hit.parts.embedding is not None and hit.parts.embedding > 0.5


def test_a_model_change_is_followed_without_a_reset(settings: Settings, fake_llm: FakeLLM) -> None:
    """Two models can give vectors of one size and unrelated meaning. Each vector names
    the model that wrote it: once MEMORYD_EMBEDDING_MODEL names another, recall compares
    a question only with that model's vectors, and beat's fill embeds the others again
    without dropping any first."""
    old = with_llm(settings, fake_llm, **REMOTE)
    client = MemoryClient(old)
    veg = client.remember("bot", "ann", "Prefers vegetarian food")
    client.remember("bot", "ann", "Lives in Lisbon")
    assert backfill.fill_missing(old) == 2
    assert not backfill.any_waiting(old)

    new = with_llm(settings, fake_llm, embedding_model="text-embedding-3-large")
    before = MemoryClient(new).recall("vegetarian food", "bot", "ann")
    assert before[0].id == veg.id  # by keyword
    assert all(hit.parts.embedding is None for hit in before)
    assert backfill.any_waiting(new)
    assert backfill.coverage(new).other_model == 2  # /v1/stats, the page, memoryd embed
    # The fill after an extraction, for one user, embeds only memories without a vector,
    # and so does `memoryd embed` unless asked (a shell may hold an old model's settings).
    assert backfill.fill_missing(new, Scope("bot", "ann")) == 0
    assert backfill.fill_missing(new) == 0
    fake_llm.requests.clear()
    assert backfill.fill_missing(new, other_models=True) == 2  # beat's
    assert [r["model"] for r in fake_llm.requests] == ["text-embedding-3-large"]
    assert not backfill.any_waiting(new)
    assert backfill.coverage(new).other_model == 0
    after = MemoryClient(new).recall("vegetarian food", "bot", "ann")
    assert after[0].id == veg.id
    assert after[0].parts.embedding is not None and after[0].parts.embedding > 0.5
    # A process still on the old model (a rolling deploy) compares nothing now.
    stale = MemoryClient(old).recall("vegetarian food", "bot", "ann")
    assert all(hit.parts.embedding is None for hit in stale)


def test_a_model_that_fails_leaves_every_vector_as_it_was(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    """A mistyped model name costs no vector and is not recorded: the old model's stay,
    and switching back embeds nothing again."""
    old = with_llm(settings, fake_llm, **REMOTE)
    client = MemoryClient(old)
    client.remember("bot", "ann", "Prefers vegetarian food")
    assert backfill.fill_missing(old) == 1
    typo = settings.updated(embedding_provider="local", embedding_model="no-such-model")
    assert backfill.fill_missing(typo) == 0
    client.remember("bot", "ann", "Lives in Lisbon")  # one memory waits
    fake_llm.refuse_embedding = lambda _text: True  # a server's 400 for a wrong name
    wrong = with_llm(settings, fake_llm, embedding_model="text-embeding-3-small")
    assert backfill.fill_missing(wrong, other_models=True) == 0
    assert backfill.coverage(wrong).refused == 0  # the memory is not blamed
    assert db.scalars(select(VectorModel.name)).all() == ["openai:text-embedding-3-small"]
    fake_llm.refuse_embedding = lambda _text: False
    assert backfill.fill_missing(old, other_models=True) == 1  # Lisbon alone
    assert client.recall("vegetarian food", "bot", "ann")[0].parts.embedding is not None


def test_vectors_written_before_models_were_named_are_the_first_models(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    """A store upgraded to named models keeps its recall by meaning: the first model
    recorded compares those vectors and its fill names them without a model call; a
    later model embeds them again."""
    s = with_llm(settings, fake_llm, **REMOTE)
    client = MemoryClient(s)
    client.remember("bot", "ann", "Prefers vegetarian food")
    assert backfill.fill_missing(s) == 1
    db.execute(update(Memory).values(vector_model_id=None))  # as written before
    db.commit()
    embeddings.clear_caches()
    assert client.recall("vegetarian food", "bot", "ann")[0].parts.embedding is not None
    assert not backfill.any_waiting(s)
    client.remember("bot", "ann", "Lives in Lisbon")
    fake_llm.requests.clear()
    assert backfill.fill_missing(s) == 1  # the new memory; the old vector is named
    assert [r["input"] for r in fake_llm.requests] == [["Lives in Lisbon"]]
    assert set(db.scalars(select(Memory.vector_model_id))) == {1}

    db.execute(update(Memory).values(vector_model_id=None))
    db.commit()
    embeddings.clear_caches()
    later = with_llm(settings, fake_llm, embedding_model="text-embedding-3-large")
    hits = MemoryClient(later).recall("Lisbon", "bot", "ann")
    assert hits and all(h.parts.embedding is None for h in hits)
    assert backfill.fill_missing(later, other_models=True) == 2


def test_a_memory_the_new_model_refuses_loses_the_old_models_vector(
    settings: Settings, fake_llm: FakeLLM
) -> None:
    """Its old vector is never compared again: it counts as waiting, then refused."""
    old = with_llm(settings, fake_llm, **REMOTE, embedding_max_attempts=1)
    MemoryClient(old).remember("bot", "ann", f"Wrote {POISON}")
    assert backfill.fill_missing(old) == 1
    new = with_llm(
        settings, fake_llm, embedding_model="text-embedding-3-large", embedding_max_attempts=1
    )
    fake_llm.refuse_embedding = lambda text: POISON in text
    assert backfill.fill_missing(new, other_models=True) == 0
    assert backfill.coverage(new).refused == 1
    assert not backfill.any_waiting(new)


def test_memories_the_new_model_refuses_never_hold_up_the_others(
    settings: Settings, fake_llm: FakeLLM
) -> None:
    """A chunk of refused memories alone is the texts' fault when the endpoint takes a
    probe: they are counted, and the fill goes on to the other model's vectors."""
    old = with_llm(settings, fake_llm, **REMOTE)
    client = MemoryClient(old)
    for text in ("Plays chess [long]", "Grows tomatoes [long]", "Lives in Lisbon", "Tea"):
        client.remember("bot", "ann", text)
    assert backfill.fill_missing(old) == 4
    new = with_llm(settings, fake_llm, embedding_model="text-embedding-3-large")
    fake_llm.refuse_embedding = lambda text: "[long]" in text  # too long for the new one
    assert backfill.fill_missing(new, limit=3, other_models=True) == 1
    assert backfill.fill_missing(new, other_models=True) == 1  # past the two refused
    assert backfill.fill_missing(new, other_models=True) == 0
    assert backfill.coverage(new).refused == 2  # three refusals each, by this model
    assert not backfill.any_waiting(new)

    # Back to the old model (a rollback): it tries afresh what the other refused.
    fake_llm.refuse_embedding = lambda _text: False
    assert backfill.fill_missing(old, other_models=True) == 4


def test_the_scope_cache_keeps_to_its_byte_budget_dropping_the_least_used(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    """At 1,536 dimensions 200,000 cached rows were 1.2 GB a process: the budget is in
    bytes, and the scopes recalled least recently go first, those holding no vector
    too (a process meets new users by the million over months)."""
    # 40 vectors of 64 float32, their ids and versions, and what the entry holds them in
    per_scope = 40 * (64 * 4 + 8 + 8) + scope_vectors.ENTRY_OVERHEAD
    s = with_llm(settings, fake_llm, **REMOTE, embedding_cache_mb=2.5 * per_scope / 1024 / 1024)
    for user in ("ann", "bob", "cid"):
        for i in range(40):
            make_memory(db, s, f"Green tea note {i} of {user}", user_id=user)
    db.commit()
    assert backfill.fill_missing(s) == 120
    client = MemoryClient(s)

    for user in ("ann", "bob", "ann", "cid"):  # bob is now the least recently used
        assert client.recall("green tea", "bot", user)
    cached = scope_vectors.cached_scopes()
    assert [(agent, user) for _url, agent, user in cached] == [("bot", "ann"), ("bot", "cid")]
    assert (
        scope_vectors.cached_bytes() == 2 * per_scope <= s.recall.embedding_cache_mb * 1024 * 1024
    )

    # Users with no vector yet cost their entry too: they do not pile up past the budget.
    budget = s.recall.embedding_cache_mb * 1024 * 1024
    for n in range(60):
        client.recall("green tea", "bot", f"new-{n}")
    assert len(scope_vectors.cached_scopes()) <= budget // scope_vectors.ENTRY_OVERHEAD < 60
    assert scope_vectors.cached_bytes() <= budget

    tiny = with_llm(settings, fake_llm, **REMOTE, embedding_cache_mb=0)
    embeddings.clear_caches()
    assert MemoryClient(tiny).recall("green tea", "bot", "ann")[0].parts.embedding is not None
    assert scope_vectors.cached_bytes() == 0  # a scope over the budget is read, not kept


def test_a_scope_read_whole_stamps_its_vectors_as_the_database_counts_them(
    settings: Settings, db: Session
) -> None:
    """Recall takes the vector cache's stamp from the rows of a small scope it read whole
    (scope_vectors.counted_stamp) instead of counting them in a statement: the same
    memories must count, the shared scope's among them, the unembedded and inactive not."""
    vector = b"\x00\x00\x80?" * 4
    for content, user, status, embedded in [
        ("Prefers green tea", "ann", MemoryStatus.ACTIVE, True),
        ("Walks the dog at noon", "ann", MemoryStatus.ACTIVE, True),
        ("Not embedded yet", "ann", MemoryStatus.ACTIVE, False),
        ("An archived habit", "ann", MemoryStatus.ARCHIVED, True),
        ("Every user of the bot is greeted in French", "*", MemoryStatus.ACTIVE, True),
        ("Another user's memory", "bob", MemoryStatus.ACTIVE, True),
    ]:
        columns = {"vector": vector, "vector_version": 3} if embedded else {}
        make_memory(db, settings, content, user_id=user, status=status, **columns)
    db.commit()
    scope = Scope("bot", "ann")
    _stats, rows = search.read_scope(db, search.search_params(scope, None, None), object())
    assert rows is not None
    assert scope_vectors.counted_stamp(rows) == scope_vectors.scope_counts(db, scope)
    assert scope_vectors.scope_counts(db, scope)[0] == 3


def test_a_scope_that_changed_reads_again_only_the_vectors_that_did(
    settings: Settings, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user of months, 2,000 memories cached. One memory said since, one edited and
    one forgotten: the next recall reads those two vectors, not the scope's 2,000 again,
    and compares exactly what a process reading the scope whole does."""
    # A scope this large is checked every STAMP_RECHECK_SECONDS: here, at each recall.
    monkeypatch.setattr(scope_vectors, "STAMP_RECHECK_SECONDS", 0.0)
    s = with_llm(settings, fake_llm, **REMOTE)
    with session_scope(s.storage) as session:
        colleagues = [
            make_memory(session, s, f"Colleague {i} lives near office {i % 40}").id
            for i in range(2000)
        ]
    while backfill.fill_missing(s):
        pass
    client = MemoryClient(s)
    first = client.recall("which office", "bot", "ann")
    assert any(hit.parts.embedding is not None for hit in first)  # the scope's vectors cached
    tea = client.remember("bot", "ann", "Prefers green tea in the morning")
    client.update("bot", "ann", colleagues[0], content="Plays the cello on Sundays")
    client.forget("bot", "ann", colleagues[1])
    assert backfill.fill_missing(s) == 2

    with _vector_reads(get_engine(s.storage, autocommit=True)) as reads:  # recall's
        hits = client.recall("green tea in the morning", "bot", "ann")
    assert hits[0].id == tea.id and hits[0].parts.embedding is not None
    assert reads == [2]  # the new memory's and the edited one's vectors, by id
    scope = Scope("bot", "ann")
    with session_scope(s.storage) as session:
        refreshed = scope_vectors.scope_vectors(session, s, scope)
        embeddings.clear_caches()
        whole = scope_vectors.scope_vectors(session, s, scope)
    assert len(whole[0]) == 2000 and colleagues[1] not in set(whole[0].tolist())
    assert (refreshed[0] == whole[0]).all() and (refreshed[1] == whole[1]).all()


@contextmanager
def _vector_reads(engine: Engine) -> Iterator[list[int]]:
    """For each statement that reads vectors, the memory ids it is bound to (0: none, the
    scope read whole)."""
    reads: list[int] = []

    def listen(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        selected = re.split(r"\sFROM\s", statement)[0]
        if re.search(r"memories\.vector(?![_\w])(?!\s+IS)", selected):
            _, _, by_id = statement.partition("memories.id IN (")
            reads.append(len(re.findall(r"\?|%\(id_\d+_\d+\)s", by_id)))  # SQLite, psycopg

    event.listen(engine, "before_cursor_execute", listen)
    try:
        yield reads
    finally:
        event.remove(engine, "before_cursor_execute", listen)
