"""The claim protocol: one live lease per session, stranded turns returned before any
claim, claims built from the rows they took, renewal while a call runs, and a batch that
outlived its lease writing nothing. On PostgreSQL and SQLite."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import select, update

from memoryd.extraction.batch import extract_session
from memoryd.extraction.extractors import OfflineExtractor
from memoryd.extraction.views import MemoryView, Proposal, TurnView
from memoryd.ingest.buffer import end_session
from memoryd.ingest.leases import Claim, claim_batch, finish_turns, release_lease
from memoryd.ingest.sweeper import run_sweep
from memoryd.models.coordination import database_time
from memoryd.models.db import session_scope, utcnow
from memoryd.models.keys import SessionKey, session_pk
from memoryd.models.tables import BatchStatus, ChatSession, ExtractionBatch, Memory, Turn
from memoryd.settings import Settings
from tests.factories import add_turns

KEY = SessionKey("bot", "ann", "s1")


def claim(settings: Settings, key: SessionKey = KEY, later: float = 0.0) -> Claim | None:
    with session_scope(settings.storage) as session:
        now = database_time(session) + timedelta(seconds=later)
        return claim_batch(session, settings.extraction, key, now)


def end(settings: Settings, key: SessionKey = KEY) -> None:
    """The conversation is over: a partial batch is due at once."""
    with session_scope(settings.storage) as session:
        end_session(session, key, utcnow())


def expire_lease(settings: Settings, key: SessionKey = KEY) -> None:
    """What a dead or hung worker leaves behind: a lease whose time has run out."""
    with session_scope(settings.storage) as session:
        past = database_time(session) - timedelta(seconds=1)
        session.execute(update(ChatSession).where(*session_pk(key)).values(lease_until=past))


def turn_rows(settings: Settings) -> list[tuple[int, str, int]]:
    with session_scope(settings.storage, readonly=True) as session:
        rows = session.execute(select(Turn.id, Turn.status, Turn.lost_leases).order_by(Turn.id))
        return [tuple(r) for r in rows]  # type: ignore[misc]


def batch_statuses(settings: Settings) -> list[str]:
    with session_scope(settings.storage, readonly=True) as session:
        return list(session.scalars(select(ExtractionBatch.status).order_by(ExtractionBatch.id)))


def test_partial_batch_waits_until_ended_or_idle(settings: Settings) -> None:
    add_turns(settings, 3)
    assert claim(settings) is None
    ready = claim(settings, later=settings.extraction.flush_idle_seconds + 1)
    assert ready is not None and len(ready.turns) == 3


def test_one_live_lease_per_session(settings: Settings) -> None:
    small = settings.updated(**{"batch_size": 2})
    add_turns(small, 4)
    first = claim(small)
    assert first is not None and [t.content for t in first.turns] == ["message 0", "message 1"]
    assert claim(small) is None  # turns 3 and 4 wait: one batch per session at a time
    assert claim(small, key=SessionKey("bot", "ann", "other")) is None  # unknown session


def test_a_claim_over_an_expired_lease_returns_the_stranded_turns_first(
    settings: Settings,
) -> None:
    """A worker died holding turns 1-2; the next claim of the session, before any sweep,
    takes turns 1-2 back rather than leaving them claimed forever and moving on to 3-4."""
    small = settings.updated(**{"batch_size": 2})
    ids = add_turns(small, 4)
    dead = claim(small)
    assert dead is not None
    expire_lease(small)
    second = claim(small)
    assert second is not None and [t.id for t in second.turns] == ids[:2]
    assert turn_rows(small)[:2] == [(ids[0], "claimed", 1), (ids[1], "claimed", 1)]
    assert batch_statuses(small) == [BatchStatus.ABANDONED, BatchStatus.RUNNING]

    # The dead worker wakes up: it can neither finish nor return turns that are not its.
    with session_scope(small.storage) as session:
        assert release_lease(session, dead) is False
    with session_scope(small.storage) as session:
        assert release_lease(session, second)
        assert finish_turns(session, small.maintenance, second) == 2
    third = claim(small)
    assert third is not None and [t.id for t in third.turns] == ids[2:]


def test_a_batch_that_outlived_its_lease_writes_nothing(settings: Settings) -> None:
    """While a hung worker's call is still out, another worker takes its turns over and
    extracts them; when the hung call finally returns, its result is thrown away."""
    add_turns(settings, 1, content="Call me Sam.")
    end(settings)
    overtaken = threading.Event()

    class HungThenBack(OfflineExtractor):
        def extract(
            self,
            turns: Sequence[TurnView],
            memories: Sequence[MemoryView],
            profiles: Any = None,
            keys: Sequence[str] = (),
        ) -> Proposal:
            expire_lease(settings)  # the lease ran out while the call was hanging
            assert extract_session(settings, KEY).turns == 1  # another worker took over
            overtaken.set()
            return super().extract(turns, memories, profiles)

    late = extract_session(settings, KEY, extractor=HungThenBack())
    assert overtaken.is_set()
    assert (late.lost_leases, late.created, late.turns) == (1, 0, 0)
    with session_scope(settings.storage, readonly=True) as session:
        memories = session.execute(select(Memory.content, Memory.evidence_count)).all()
    assert [tuple(m) for m in memories] == [("Wants to be called Sam", 1)]
    assert batch_statuses(settings) == [BatchStatus.ABANDONED, BatchStatus.DONE]
    assert [status for _id, status, _lost in turn_rows(settings)] == ["done"]


def test_a_slow_but_live_call_renews_its_lease_and_is_not_taken_over(
    settings: Settings,
) -> None:
    """The LLM takes two and a half times the lease: the batch's heartbeat keeps it, so
    neither the sweeper nor another worker takes the turns, and nothing is extracted
    twice. (A 2 s lease leaves a renewal 1.3 s: a busy CI machine once held one for more
    than the 2 s of a 3 s lease in the chaos suite.)"""
    quick = settings.updated(**{"lease_seconds": 2.0})
    add_turns(quick, 1, content="Call me Sam.")
    end(quick)
    started = threading.Event()

    class Slow(OfflineExtractor):
        def extract(
            self,
            turns: Sequence[TurnView],
            memories: Sequence[MemoryView],
            profiles: Any = None,
            keys: Sequence[str] = (),
        ) -> Proposal:
            started.set()
            time.sleep(5.0)
            return super().extract(turns, memories, profiles)

    stats: list[object] = []
    worker = threading.Thread(
        target=lambda: stats.append(extract_session(quick, KEY, extractor=Slow()))
    )
    worker.start()
    assert started.wait(10)
    others = []
    while worker.is_alive():
        others.append(run_sweep(quick).returned_turns)
        others.append(extract_session(quick, KEY).turns)
        time.sleep(0.2)
    worker.join()
    assert len(others) > 10 and set(others) == {0}
    assert batch_statuses(quick) == [BatchStatus.DONE]
    assert [status for _id, status, lost in turn_rows(quick)] == ["done"]


def test_a_worker_whose_clock_runs_ahead_does_not_steal_a_live_lease(settings: Settings) -> None:
    """Leases are read and written on the database's clock, not the worker's."""
    add_turns(settings, 1)
    holder = claim(settings, later=settings.extraction.flush_idle_seconds + 1)
    assert holder is not None
    ahead = extract_session(
        settings,
        KEY,
        clock=lambda: utcnow() + timedelta(seconds=settings.extraction.lease_seconds * 10),
    )
    assert (ahead.batches, ahead.lost_leases) == (0, 0)
    with session_scope(settings.storage, readonly=True) as session:
        lease = session.scalars(select(ChatSession.lease_batch_id)).one()
    assert lease == holder.batch_id


def test_racing_claimers_with_expiring_leases_finish_every_turn_exactly_once(
    settings: Settings,
) -> None:
    """Six workers claim one session over and over with a lease shorter than some of
    their pauses: leases expire under them and are taken over, yet each turn is finished
    by exactly one batch and none is left behind."""
    racy = settings.updated(**{"batch_size": 4, "lease_seconds": 0.3})
    ids = add_turns(racy, 40)
    end(racy)
    finished: Counter[int] = Counter()
    overtaken = [0]  # batches that lost their lease before they could finish
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        # Every worker's first batch outlives its lease, so a takeover happens in every
        # run, not only when the dice say so; later pauses are drawn at random.
        pauses = [0.5]
        try:
            for _ in range(400):
                taken = claim(racy)
                if taken is None:
                    if not _left(racy):
                        return
                    time.sleep(0.02)
                    continue
                pause = pauses.pop() if pauses else rng.choice([0.0, 0.05, 0.5])
                time.sleep(pause)  # 0.5 s: the lease runs out
                with session_scope(racy.storage) as session:
                    if release_lease(session, taken):
                        assert finish_turns(session, racy.maintenance, taken) == len(taken.turns)
                        with lock:
                            finished.update(t.id for t in taken.turns)
                    else:
                        with lock:
                            overtaken[0] += 1
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert overtaken[0] > 0  # the race really happened
    assert finished == Counter(ids)  # every turn once, none twice
    assert {status for _id, status, _lost in turn_rows(racy)} == {"done"}


def _left(settings: Settings) -> int:
    return sum(1 for _id, status, _lost in turn_rows(settings) if status != "done")


def test_a_batch_that_kills_its_worker_every_time_is_dead_lettered(settings: Settings) -> None:
    fragile = settings.updated(**{"max_lost_leases": 2})
    add_turns(fragile, 2)
    end(fragile)
    for _ in range(2):
        assert claim(fragile) is not None
        expire_lease(fragile)
        assert run_sweep(fragile).returned_turns == 2
    assert [(status, lost) for _id, status, lost in turn_rows(fragile)] == [("failed", 2)] * 2
    assert claim(fragile) is None
