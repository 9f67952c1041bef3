"""The embedding fill cannot stall: a refused memory costs itself, an outage costs nothing,
and the fill runs on a queue of its own."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.models.coordination import LOCK_CLASS_EMBEDDING, single_flight
from memoryd.models.tables import Memory
from memoryd.recall import backfill
from memoryd.settings import Settings
from memoryd.worker import app
from memoryd.worker.config import EMBED_TASK, EMBEDDING_QUEUE
from testkit import fakellm
from testkit.fakellm import FakeLLM
from tests.conftest import with_llm
from tests.factories import make_memory

REMOTE = {"embedding_model": "text-embedding-3-small", "llm_retries": 0}
POISON = "an essay far longer than the embedding model takes"


def embedding_requests(llm: FakeLLM) -> int:
    return sum(1 for r in llm.requests if "input" in r)


def unembedded(db: Session) -> list[str]:
    rows = db.scalars(select(Memory.content).where(Memory.vector.is_(None))).all()
    db.commit()
    return list(rows)


def test_one_memory_the_endpoint_refuses_never_keeps_the_others_waiting(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm, **REMOTE)
    fake_llm.refuse_embedding = lambda text: POISON in text
    make_memory(db, s, f"Wrote {POISON}")  # the oldest: every fill used to start with it
    for i in range(150):  # more than two fill chunks after it
        make_memory(db, s, f"Remembers detail number {i} of the trip")
    db.commit()

    assert backfill.fill_missing(s) == 150
    assert unembedded(db) == [f"Wrote {POISON}"]
    assert backfill.coverage(s) == backfill.Coverage(embedded=150, waiting=1, refused=0)

    for _ in range(s.recall.embedding_max_attempts - 1):  # the next fills try it again ...
        assert backfill.fill_missing(s) == 0
    assert backfill.coverage(s) == backfill.Coverage(embedded=150, waiting=0, refused=1)
    sent = embedding_requests(fake_llm)
    assert backfill.fill_missing(s) == 0  # ... until it is left out: no request at all
    assert embedding_requests(fake_llm) == sent

    memory = db.scalars(select(Memory).where(Memory.vector.is_(None))).one()
    db.commit()
    MemoryClient(s).update("bot", "ann", memory.id, content="Wrote a short note")
    assert backfill.fill_missing(s) == 1
    assert backfill.coverage(s) == backfill.Coverage(embedded=151, waiting=0, refused=0)


def test_an_endpoint_that_is_down_blames_no_memory(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm, **REMOTE)
    for i in range(3):
        make_memory(db, s, f"Plays chess on day {i}")
    db.commit()
    fake_llm.down = True
    for _ in range(s.recall.embedding_max_attempts + 1):
        assert backfill.fill_missing(s) == 0
    assert embedding_requests(fake_llm) == s.recall.embedding_max_attempts + 1  # one per fill
    assert db.scalar(select(func.max(Memory.embed_failures))) == 0
    db.commit()
    fake_llm.down = False
    assert backfill.fill_missing(s) == 3


def failures(db: Session) -> list[int]:
    counts = db.scalars(select(Memory.embed_failures).order_by(Memory.id)).all()
    db.commit()
    return list(counts)


def test_a_misconfigured_endpoint_blames_no_memory(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    """A bad key or an unknown model refuses every text: that is the endpoint's fault, and
    so is a chunk whose every memory is refused on its own."""
    s = with_llm(settings, fake_llm, **REMOTE, embedding_max_attempts=1)
    for i in range(3):
        make_memory(db, s, f"Collects stamps from country {i}")
    db.commit()
    fake_llm.push(fakellm.server_error(401), fakellm.server_error(404))
    assert backfill.fill_missing(s) == 0
    assert backfill.fill_missing(s) == 0
    fake_llm.refuse_embedding = lambda _text: True  # answers 400 to every text
    assert backfill.fill_missing(s) == 0
    assert failures(db) == [0, 0, 0]
    fake_llm.refuse_embedding = lambda _text: False
    assert backfill.fill_missing(s) == 3


def test_one_fill_runs_at_a_time(settings: Settings, db: Session, fake_llm: FakeLLM) -> None:
    s = with_llm(settings, fake_llm, **REMOTE)
    make_memory(db, s, "Plays the oboe")
    db.commit()
    with single_flight(s.storage, LOCK_CLASS_EMBEDDING, "fill") as alone:
        assert alone
        assert backfill.fill_missing(s) == 0  # another fill is running: this one leaves
    assert embedding_requests(fake_llm) == 0
    assert backfill.fill_missing(s) == 1


def test_beat_sends_a_fill_only_while_a_memory_waits(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm, **REMOTE)
    assert not backfill.any_waiting(s)
    make_memory(db, s, "Plays the oboe")
    db.commit()
    assert backfill.any_waiting(s)
    backfill.fill_missing(s)
    assert not backfill.any_waiting(s)


def test_a_model_change_tries_refused_memories_again(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm, **REMOTE, embedding_max_attempts=1)
    fake_llm.refuse_embedding = lambda text: POISON in text
    make_memory(db, s, f"Wrote {POISON}")
    db.commit()
    assert backfill.fill_missing(s) == 0
    assert backfill.coverage(s).refused == 1
    fake_llm.refuse_embedding = lambda _text: False  # a model with a longer context
    backfill.reset_vectors(s.storage)
    assert backfill.fill_missing(s) == 1


def test_the_fill_has_a_queue_of_its_own() -> None:
    route = app.amqp.router.route({}, EMBED_TASK)
    assert route["queue"].name == EMBEDDING_QUEUE
    assert EMBEDDING_QUEUE in {q.name for q in app.conf.task_queues}


@pytest.mark.parametrize(
    "outage",
    [fakellm.server_error(), fakellm.not_json("text/html")],
    ids=["500", "a proxy's page"],  # the page raised the SDK's AttributeError, a bug
)
def test_stats_count_memories_waiting_for_a_vector_and_refused(
    settings: Settings, db: Session, fake_llm: FakeLLM, outage: fakellm.Action
) -> None:
    from memoryd.extraction.stats import pipeline_stats

    assert pipeline_stats(settings)["embeddings"] is None  # embeddings off
    s = with_llm(settings, fake_llm, **REMOTE, embedding_max_attempts=1)
    fake_llm.refuse_embedding = lambda text: POISON in text
    make_memory(db, s, f"Wrote {POISON}")
    make_memory(db, s, "Likes rye bread")
    db.commit()
    fake_llm.push(outage)  # the first fill meets an outage
    backfill.fill_missing(s)
    counts = {"embedded": 0, "waiting": 2, "refused": 0, "other_model": 0}
    assert pipeline_stats(s)["embeddings"] == counts
    backfill.fill_missing(s)
    counts = {"embedded": 1, "waiting": 0, "refused": 1, "other_model": 0}
    assert pipeline_stats(s)["embeddings"] == counts


def test_the_page_and_http_stats_show_memories_the_endpoint_refused(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    from fastapi.testclient import TestClient

    from memoryd.server.app import create_app
    from tests.server.conftest import bearer, make_key, sign_in

    s = with_llm(settings, fake_llm, **REMOTE, embedding_max_attempts=1)
    fake_llm.refuse_embedding = lambda text: POISON in text
    make_memory(db, s, f"Wrote {POISON}")
    make_memory(db, s, "Likes rye bread")
    make_memory(db, s, "Keeps bees")
    db.commit()
    backfill.fill_missing(s, limit=2)  # the refused one and one more; the third waits
    admin = make_key(s, "ops", admin=True)
    app = create_app(s, client=MemoryClient(s, dispatch=False))
    with TestClient(app, base_url="https://testserver") as http:
        stats = http.get("/v1/stats", headers=bearer(admin)).json()
        counts = {"embedded": 1, "waiting": 1, "refused": 1, "other_model": 0}
        assert stats["pipeline"]["embeddings"] == counts
        sign_in(http, admin)
        page = http.get("/").text
    assert "Waiting for a vector</span><b>1</b>" in page
    assert "1 refused by the embedding model" in page
