"""Writers of one scope at once: direct saves, extraction, recalls and the usage fold never
race each other into duplicates or lost updates. Real threads on both databases."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from functools import partial

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.extraction.batch import extract_session
from memoryd.maintenance.cycle import promote_due
from memoryd.maintenance.usage import fold_chunk, fold_usage
from memoryd.memories.proposals import Fact
from memoryd.memories.reconcile import reconcile_facts
from memoryd.models.coordination import lock_scope
from memoryd.models.db import get_engine, session_scope, utcnow
from memoryd.models.keys import Scope, SessionKey
from memoryd.models.tables import Memory, MemoryStatus, MemoryUsage, Tier
from memoryd.recall.usage import log_retrieval
from memoryd.settings import Settings
from tests.factories import make_memory


def run_together(jobs: list[Callable[[], object]]) -> None:
    """Start every job at the same instant; re-raise the first error."""
    barrier = threading.Barrier(len(jobs))
    errors: list[BaseException] = []

    def run(job: Callable[[], object]) -> None:
        barrier.wait()
        try:
            job()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors


def active(db: Session) -> list[tuple[str, int]]:
    rows = db.execute(
        select(Memory.content, Memory.evidence_count).where(Memory.status == MemoryStatus.ACTIVE)
    ).all()
    db.commit()
    return [tuple(r) for r in rows]  # type: ignore[misc]


def test_twenty_concurrent_saves_of_one_fact_leave_one_memory_seen_twenty_times(
    settings: Settings, db: Session
) -> None:
    client = MemoryClient(settings, dispatch=False)
    run_together([lambda: client.remember("bot", "ann", "Allergic to peanuts")] * 20)
    assert active(db) == [("Allergic to peanuts", 20)]


def test_a_save_racing_an_extraction_of_the_same_fact_leaves_one_memory(
    settings: Settings, db: Session
) -> None:
    client = MemoryClient(settings, dispatch=False)
    for i in range(5):
        session = f"s{i}"
        client.enqueue_turn(
            agent_id="bot", user_id="ann", session_id=session, role="user", content="Call me Sam."
        )
        client.end_session("bot", "ann", session)
    jobs: list[Callable[[], object]] = [
        lambda: client.remember("bot", "ann", "Wants to be called Sam", name="preferred name")
    ] * 5
    jobs += [
        partial(extract_session, settings, SessionKey("bot", "ann", f"s{i}")) for i in range(5)
    ]
    run_together(jobs)
    assert active(db) == [("Wants to be called Sam", 10)]


def test_concurrent_recalls_count_every_access(settings: Settings, db: Session) -> None:
    make_memory(db, settings, "Plays the cello on Sundays", confidence=0.7)  # short tier
    db.commit()
    """Recalls append, folds running beside them apply each retrieval exactly once."""
    client = MemoryClient(settings, dispatch=False)
    recalls = [lambda: client.recall("cello", "bot", "ann")] * 20
    run_together([*recalls, *[lambda: fold_usage(settings)] * 3])
    fold_usage(settings)
    memory = db.scalars(select(Memory)).one()
    assert memory.access_count == 20
    db.commit()


def test_a_recall_never_undoes_a_promotion(settings: Settings, db: Session) -> None:
    """Promotion moves a memory to the long tier while recalls of it run and their usage
    is folded: however they interleave, it ends long-term with the archive due time that
    tier needs."""
    memory = make_memory(db, settings, "Learning the cello", confidence=0.7)
    db.commit()
    client = MemoryClient(settings, dispatch=False)
    for _ in range(settings.memories.promote_access_count):
        client.recall("cello", "bot", "ann")
    fold_usage(settings)

    def promote() -> None:
        # A row that a recall holds locked is skipped, for the next sweep to take.
        for _ in range(200):
            with session_scope(settings.storage) as session:
                if promote_due(session, settings.memories, utcnow()) == 1:
                    return
            time.sleep(0.01)
        raise AssertionError("the memory was never promoted")

    recalls = [lambda: client.recall("cello", "bot", "ann")] * 10
    run_together([promote, lambda: fold_usage(settings), *recalls])
    fold_usage(settings)
    db.expire_all()
    promoted = db.get(Memory, memory.id)
    assert promoted is not None
    assert (promoted.tier, promoted.expires_at) == (Tier.LONG, None)
    assert promoted.archive_due_at is not None
    assert promoted.archive_due_at > utcnow() + timedelta(days=30)
    assert promoted.access_count == settings.memories.promote_access_count + 10
    db.commit()


def test_a_replacement_locks_memories_in_the_order_the_usage_fold_does(
    backend: str, settings: Settings, db: Session
) -> None:
    """Extraction replacing two memories of a single-valued key (the one it names, the
    newer, and an older one of the key) against the usage fold locking both in id order:
    the writer takes them in id order too, in one statement, so neither holds a row the
    other waits for. Before, it locked the named one first: a deadlock."""
    if backend != "postgres":
        pytest.skip("SQLite writers hold the whole database: no row order to get wrong")
    client = MemoryClient(settings, dispatch=False)
    older = client.remember("bot", "ann", "Lives in Lisbon", name="home city")
    newer = client.remember("bot", "ann", "Works in Madrid", name="home city")
    newer_than_older = newer.id > older.id
    assert newer_than_older
    fact = Fact(content="Lives in Porto", name="home city", single=True, replaces=1, confidence=0.9)
    writer_error: list[BaseException] = []

    def extract() -> None:
        try:
            with session_scope(settings.storage) as session:
                lock_scope(session, Scope("bot", "ann"))
                scope = Scope("bot", "ann")
                reconcile_facts(session, settings, scope, [fact], {1: newer.id}, utcnow())
        except BaseException as exc:
            writer_error.append(exc)

    # What the usage fold does: the rows it changes FOR UPDATE, by ascending id.
    with get_engine(settings.storage).connect() as recall, recall.begin():
        recall.execute(text("SET LOCAL lock_timeout = '3s'"))
        recall.execute(select(Memory.id).where(Memory.id == older.id).with_for_update()).all()
        writer = threading.Thread(target=extract)
        writer.start()
        time.sleep(0.5)  # the writer now waits for the older row
        # Recall's next row: free, since the writer locks in id order, holding nothing yet.
        recall.execute(select(Memory.id).where(Memory.id == newer.id).with_for_update()).all()
    writer.join(timeout=30)
    assert writer_error == []
    assert active(db) == [("Lives in Porto", 1)]


def test_a_fold_locks_memories_before_their_usage_rows_as_an_erasure_does(
    backend: str, settings: Settings, db: Session
) -> None:
    """An erasure locks the scope's memories, then deleting them deletes their usage
    rows. A fold that took the usage rows first and then waited for the memories would
    deadlock with it; the fold waits for the memories first, holding nothing."""
    if backend != "postgres":
        pytest.skip("SQLite writers hold the whole database: no row order to get wrong")
    memory = make_memory(db, settings, "Plays the cello")
    db.commit()
    client = MemoryClient(settings, dispatch=False)
    client.recall("cello", "bot", "ann")
    folded: list[int] = []
    with get_engine(settings.storage).connect() as erasure, erasure.begin():
        erasure.execute(text("SET LOCAL lock_timeout = '3s'"))
        erasure.execute(select(Memory.id).where(Memory.id == memory.id).with_for_update()).all()
        fold = threading.Thread(target=lambda: folded.append(fold_usage(settings)))
        fold.start()
        time.sleep(0.5)  # the fold is waiting for the memory now
        erasure.execute(text("DELETE FROM memories WHERE id = :id"), {"id": memory.id})
    fold.join(timeout=30)
    assert folded == [0]  # the row went with its memory: nothing left to fold
    assert db.scalar(select(func.count()).select_from(MemoryUsage)) == 0
    db.commit()


def test_a_fold_in_progress_never_holds_up_a_recall(
    backend: str, settings: Settings, db: Session
) -> None:
    """A fold holds its memories' rows while it writes them; a recall of those memories
    meanwhile inserts usage rows that reference them, and is not kept waiting."""
    if backend != "postgres":
        pytest.skip("SQLite writers hold the whole database: no row lock to wait on")
    make_memory(db, settings, "Plays the cello")
    db.commit()
    client = MemoryClient(settings, dispatch=False)
    client.recall("cello", "bot", "ann")
    took: list[float] = []

    def recall() -> None:
        started = time.monotonic()
        client.recall("cello", "bot", "ann")
        took.append(time.monotonic() - started)

    with session_scope(settings.storage) as folding:
        assert fold_chunk(folding, settings.memories) == 1  # its memory stays locked until commit
        other = threading.Thread(target=recall)
        other.start()
        other.join(timeout=5)
        assert took and took[0] < 2.0, took
    assert fold_usage(settings) == 1


def test_a_recall_of_a_memory_deleted_meanwhile_logs_the_others(
    backend: str, settings: Settings, db: Session
) -> None:
    """A memory ranked by a recall is deleted by another transaction before the recall
    logs its usage: the recall waits for that transaction, then logs the other hits,
    never failing on the deleted one's foreign key."""
    if backend != "postgres":
        pytest.skip("SQLite writers hold the whole database: no delete can come between")
    gone = make_memory(db, settings, "Plays the cello")
    kept = make_memory(db, settings, "Plays the cello badly")
    db.commit()
    hits = MemoryClient(settings, dispatch=False).recall("cello", "bot", "ann")
    assert {h.id for h in hits} == {gone.id, kept.id}
    errors: list[BaseException] = []

    def log() -> None:
        try:
            with session_scope(settings.storage) as session:
                log_retrieval(
                    session, settings.recall, Scope("bot", "ann"), hits, "again", None, utcnow()
                )
        except BaseException as exc:
            errors.append(exc)

    with get_engine(settings.storage).connect() as eraser, eraser.begin():
        eraser.execute(select(Memory.id).where(Memory.id == gone.id).with_for_update()).all()
        eraser.execute(text("DELETE FROM memories WHERE id = :id"), {"id": gone.id})
        logger = threading.Thread(target=log)
        logger.start()
        time.sleep(0.5)  # the log is waiting for the deleted row now
    logger.join(timeout=30)
    assert errors == []
    logged = db.scalars(select(MemoryUsage.memory_id).where(MemoryUsage.query == "again")).all()
    assert logged == [kept.id]
    db.commit()
