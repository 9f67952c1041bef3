"""Poison isolation: a batch that fails for good because of one of its turns is split
until that turn stands alone; only it counts attempts and is dead-lettered, and every
other turn of the session is extracted."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.extraction.batch import ExtractStats, extract_session
from memoryd.extraction.extractors import OfflineExtractor
from memoryd.extraction.views import Proposal, TurnView
from memoryd.ingest.sweeper import run_sweep
from memoryd.models.db import session_scope
from memoryd.models.keys import SessionKey
from memoryd.models.tables import ChatSession, ExtractionBatch, Turn
from memoryd.settings import Settings
from testkit import fakellm
from testkit.fakellm import FakeLLM
from tests.conftest import with_llm

KEY = SessionKey("bot", "ann", "s")
POISON = "this one is poison"
LINES = [f"Note {i}: I like the number {i}." for i in range(12)]
LINES[7] = POISON


def say(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    client.enqueue_turns(
        [
            {
                "agent_id": KEY.agent_id,
                "user_id": KEY.user_id,
                "session_id": KEY.session_id,
                "role": "user",
                "content": line,
            }
            for line in LINES
        ]
    )
    client.end_session(KEY.agent_id, KEY.user_id, KEY.session_id)


def drain(settings: Settings, run: Callable[[], ExtractStats]) -> int:
    """Run extraction as the sweeper would, until no turn is pending; the runs."""
    for runs in range(1, 40):
        with contextlib.suppress(ZeroDivisionError):  # a bug fails its task
            run()
        with session_scope(settings.storage, readonly=True) as db:
            if not db.scalars(select(Turn).where(Turn.status == "pending")).first():
                return runs
    raise AssertionError("the session never drained")


def states(db: Session) -> dict[str, tuple[str, int]]:
    return {t.content: (t.status, t.attempts) for t in db.scalars(select(Turn))}


class PoisonedExtractor(OfflineExtractor):
    """The offline extractor with a bug that one turn's text sets off, every time."""

    def extract(
        self,
        turns: Sequence[TurnView],
        memories: Sequence[Any],
        profiles: Any = None,
        keys: Sequence[str] = (),
    ) -> Proposal:
        if any(POISON in t.content for t in turns):
            raise ZeroDivisionError("a bug one turn sets off")
        return super().extract(turns, memories, profiles, keys)


def assert_only_the_poison_failed(db: Session, attempts: int) -> None:
    found = states(db)
    assert found.pop(POISON) == ("failed", attempts)
    assert set(found.values()) == {("done", 0)} and len(found) == len(LINES) - 1
    chat = db.scalars(select(ChatSession)).one()
    assert (chat.split_limit, chat.split_until) == (None, None)  # back to whole batches


def test_a_turn_that_sets_off_a_bug_is_dead_lettered_alone(settings: Settings, db: Session) -> None:
    s = settings.updated(**{"max_attempts": 2, "batch_size": 12})
    say(s)
    runs = drain(s, lambda: extract_session(s, KEY, extractor=PoisonedExtractor()))
    assert_only_the_poison_failed(db, attempts=2)
    # 12 → 6 → 3 → 1 (the poison, twice); the good halves between them: few runs.
    failed = [b for b in db.scalars(select(ExtractionBatch)) if b.status == "failed"]
    assert [b.turn_count for b in failed] == [12, 6, 3, 1, 1]
    assert runs <= 10


def refuse_poison(messages: list[dict[str, Any]]) -> str:
    """A model that cannot answer a prompt holding the poison turn: invalid JSON, twice
    (after the repair round, a permanent error)."""
    if any(POISON in str(m.get("content")) for m in messages):
        return "I cannot help with that."
    return fakellm.default_extractor_answer(messages)


def test_a_turn_the_model_always_fails_on_is_dead_lettered_alone(
    settings: Settings, db: Session
) -> None:
    with FakeLLM(responder=refuse_poison) as llm:
        s = with_llm(settings, llm, max_attempts=2, batch_size=12)
        say(s)
        drain(s, lambda: extract_session(s, KEY))
    assert_only_the_poison_failed(db, attempts=2)
    # Every good turn reached the model in a batch that succeeded.
    done = [b for b in db.scalars(select(ExtractionBatch)) if b.status == "done"]
    assert sum(b.turn_count for b in done) == len(LINES) - 1


def test_a_split_session_stays_due_until_the_split_ends(settings: Settings, db: Session) -> None:
    """Half a batch is no full batch, and a session still in progress is neither ended
    nor idle: without this the rest of a split waited for the idle flush (300 s)."""
    s = settings.updated(**{"max_attempts": 1, "batch_size": 12, "extract_batches_per_task": 1})
    client = MemoryClient(s, dispatch=False)
    client.enqueue_turns(
        [
            {"agent_id": "bot", "user_id": "ann", "session_id": "s", "role": "user", "content": c}
            for c in LINES
        ]
    )  # the session goes on: not ended
    extractor = PoisonedExtractor()
    with contextlib.suppress(ZeroDivisionError):
        extract_session(s, KEY, extractor=extractor)  # 12 claimed, split
    extract_session(s, KEY, extractor=extractor)  # the first 6 extracted
    assert KEY in run_sweep(s).due  # 6 pending of 12, split: due all the same
    client.end_session(KEY.agent_id, KEY.user_id, KEY.session_id)  # then the rest goes
    drain(s, lambda: extract_session(s, KEY, extractor=extractor))
    assert_only_the_poison_failed(db, attempts=1)
    assert KEY not in run_sweep(s).due
