"""The chaos scenarios whose fault is in what the model or the embedding endpoint
answers: errors and hangs, an answer that never parses, a fact that cannot be stored, a
text the endpoint refuses (bench/chaos_scenarios.py lists them all)."""

from __future__ import annotations

import json
import random
import threading
import time
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from bench.chaos_harness import Harness, Outcome
from bench.chaos_load import Conversation, chaos_answer, fact_for
from memoryd.models.db import session_scope
from memoryd.models.tables import ExtractionBatch, Memory, MemoryStatus
from testkit import fakellm

if TYPE_CHECKING:
    from bench.chaos_scenarios import Size


def llm_faults(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """20% 429 with Retry-After, 10% 500, 5% malformed JSON, 5% hang past the timeout."""
    rng = random.Random(3)
    lock = threading.Lock()

    def choose() -> fakellm.Action | None:
        with lock:
            roll = rng.random()
        if roll < 0.20:
            return fakellm.rate_limited(retry_after=1)
        if roll < 0.30:
            return fakellm.server_error(500)
        if roll < 0.35:
            return fakellm.malformed()
        if roll < 0.40:
            return fakellm.slow(h.settings.llm.llm_timeout_seconds + 1)
        return None

    h.llm.chooser = choose
    h.run(convs=convs, seconds=size.feed_seconds, delay=0.2)


POISON = "[poison]"


def poison(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """One user turn in each of the first user's sessions makes the model fail every
    time (invalid JSON, and again after the repair round: a permanent error). Its batch
    is split until it stands alone; it alone is dead-lettered, every other turn extracted."""
    for conv in convs[: size.sessions]:
        turn = conv.turns[10]  # a user turn, within the first batch
        h.poisoned.add(conv.tags[5])
        turn["content"] = f"{turn['content'][:12]} {POISON}{turn['content'][12:]}"

    def refuse_poison(messages: list[dict[str, Any]]) -> str:
        if any(POISON in str(m.get("content")) for m in messages):
            return "I cannot answer that."
        return chaos_answer(messages)

    h.llm.responder = refuse_poison
    h.run(convs=convs, seconds=size.feed_seconds, delay=0.2)


def nul_in_a_fact(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """The model's answer holds a NUL in one fact of a batch, in each of the first user's
    sessions: that fact alone is left out (counted `invalid_text`), the batch's other
    facts are stored and no turn is dead-lettered."""
    for conv in convs[: size.sessions]:
        h.dropped.add(conv.tags[3])
    unusable = {fact_for(tag) for tag in h.dropped}

    def with_nul(messages: list[dict[str, Any]]) -> str:
        answer = json.loads(chaos_answer(messages))
        for fact in answer["facts"]:
            if fact["content"] in unusable:
                fact["content"] = fact["content"].replace(" ", "\x00", 1)
        return json.dumps(answer)

    h.llm.responder = with_nul
    h.run(convs=convs, seconds=size.feed_seconds, delay=0.2)


def facts_counted_invalid(h: Harness, outcome: Outcome) -> None:
    with session_scope(h.settings.storage, readonly=True) as session:
        counted = sum(
            (reasons or {}).get("invalid_text", 0)
            for reasons in session.scalars(select(ExtractionBatch.rejections))
        )
    outcome.notes.append(f"{counted} facts left out as invalid_text")
    outcome.must_be_zero["nul_facts_not_counted"] = max(len(h.dropped) - counted, 0)


CHAOS_EMBEDDINGS = {"embedding_model": "chaos-embedding"}


def embedding_refusal(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """Embeddings on; the endpoint refuses the text of one memory in each of the first
    user's sessions (too long for its model, as a real one says). Every other memory
    must get its vector."""
    refused = {fact_for(conv.tags[3]) for conv in convs[: size.sessions]}
    h.llm.refuse_embedding = lambda text: any(fact in text for fact in refused)
    h.run(convs=convs, seconds=size.feed_seconds, delay=0.2)


def every_other_memory_embedded(h: Harness, outcome: Outcome) -> None:
    """Waits (at most a minute) for the embedding queue to catch up with the last batch."""
    deadline = time.monotonic() + 60
    while True:
        with session_scope(h.settings.storage, readonly=True) as session:
            waiting = session.execute(
                select(Memory.content, Memory.embed_failures).where(
                    Memory.status == MemoryStatus.ACTIVE, Memory.vector.is_(None)
                )
            ).all()
        refused = [c for c, failures in waiting if h.llm.refuse_embedding(c)]
        if len(refused) == len(waiting) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    outcome.notes.append(f"{len(refused)} refused memories without a vector")
    outcome.must_be_zero["unembedded"] = len(waiting) - len(refused)
