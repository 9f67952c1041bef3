"""The subject key index: each scope's keys with their active memories, kept by the
database on every write path, read at the same cost at any store size."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from memoryd.extraction.prepare import offered_keys
from memoryd.maintenance.retention import purge_deleted
from memoryd.memories.erasure import erase
from memoryd.memories.store import set_content
from memoryd.models import key_index
from memoryd.models.db import get_engine, session_scope, utcnow
from memoryd.models.keys import Scope
from memoryd.models.tables import KeyAlias, Memory, MemoryStatus, SubjectKey
from memoryd.settings import Settings
from testkit.plans import sent_with, statements_sent
from tests.conftest import make_settings
from tests.factories import make_memory

ANN = Scope("bot", "ann")


def noted(db: Session, settings: Settings, key: str, i: int, user: str = "ann") -> Memory:
    """A memory of subject `key` ('' for none), `i` minutes old."""
    when = utcnow() - timedelta(minutes=i)
    text = f"Note {i} about {key or 'nothing in particular'}"
    memory = make_memory(db, settings, text, user_id=user, updated_at=when)
    set_content(memory, memory.content, key)
    return memory


def from_memories(db: Session, scope: Scope) -> Counter[str]:
    """What the index must say: the scope's active memories per key, counted directly."""
    rows = db.execute(
        select(Memory.name_key, func.count())
        .where(Memory.of(scope), Memory.status == MemoryStatus.ACTIVE, Memory.name_key != "")
        .group_by(Memory.name_key)
    )
    return Counter(dict(rows.all()))


def indexed(db: Session, scope: Scope) -> Counter[str]:
    return Counter({u.key: u.active for u in key_index.keys_in_use(db, scope)})


def test_an_old_key_is_listed_behind_thousands_of_newer_memories(
    settings: Settings, db: Session
) -> None:
    noted(db, settings, "home city", 5000)  # said long ago
    for i in range(3000):  # then thousands of memories of other subjects
        noted(db, settings, f"topic {i % 1500}", 3000 - i)
    noted(db, settings, "gym", 1, user="bob")  # another scope's
    db.commit()
    uses = key_index.keys_in_use(db, ANN)
    assert len(uses) == 1501
    assert "home city" in {u.key for u in uses}
    assert "gym" not in {u.key for u in uses}
    assert uses[0].active == 2  # most used first
    assert indexed(db, ANN) == from_memories(db, ANN)


def test_every_write_path_keeps_the_index_right(settings: Settings, db: Session) -> None:
    memories = [noted(db, settings, key, i) for i, key in enumerate(["pet", "pet", "job", ""])]
    db.commit()
    assert indexed(db, ANN) == Counter({"pet": 2, "job": 1})
    memories[0].status = MemoryStatus.SUPERSEDED  # retired by a newer fact
    set_content(memories[2], memories[2].content, "employer")  # renamed
    set_content(memories[3], memories[3].content, "diet")  # given a key
    db.commit()
    assert (
        indexed(db, ANN) == from_memories(db, ANN) == Counter({"pet": 1, "employer": 1, "diet": 1})
    )
    db.execute(update(Memory).where(Memory.id == memories[1].id).values(status="archived"))
    db.execute(delete(Memory).where(Memory.id == memories[3].id))  # SQL by hand, too
    db.commit()
    assert indexed(db, ANN) == from_memories(db, ANN) == Counter({"employer": 1})


def test_a_fold_leaves_one_row_per_key_and_nothing_of_a_key_no_memory_holds(
    settings: Settings, db: Session
) -> None:
    kept = [noted(db, settings, "pet", i) for i in range(3)]
    gone = noted(db, settings, "old flame", 9)
    db.add(
        KeyAlias(
            agent_id="bot", user_id="ann", alias="ex", name_key="old flame", created_at=utcnow()
        )
    )
    db.commit()
    key_index.fold(db, 1000)
    db.commit()
    kept[0].status = MemoryStatus.DELETED
    gone.status = MemoryStatus.DELETED
    gone.updated_at = utcnow() - timedelta(days=3650)
    db.commit()
    purge_deleted(db, settings.memories, utcnow(), 100)  # retention removes it from the store
    db.commit()
    key_index.fold(db, 1000)
    db.commit()
    rows = db.execute(select(SubjectKey.name_key, SubjectKey.active, SubjectKey.held)).all()
    assert sorted(rows) == [("pet", 2, 3)]
    assert db.scalar(select(func.count()).select_from(KeyAlias)) == 0
    assert indexed(db, ANN) == from_memories(db, ANN)


def test_erasure_leaves_no_key_and_no_alias_of_the_scope(settings: Settings, db: Session) -> None:
    noted(db, settings, "home city", 1)
    noted(db, settings, "gym", 1, user="bob")
    key_index.add_alias(db, ANN, "city of residence", "home city", utcnow())
    db.commit()
    erase(settings, ANN, actor="test")
    with session_scope(settings.storage, readonly=True) as session:
        left = session.scalars(select(SubjectKey.user_id)).all()
        assert left == ["bob"]
        assert session.scalar(select(func.count()).select_from(KeyAlias)) == 0


def test_an_alias_never_chains_and_never_names_itself(settings: Settings, db: Session) -> None:
    now = utcnow()
    assert key_index.add_alias(db, ANN, "city of residence", "home city", now)
    assert not key_index.add_alias(db, ANN, "city of residence", "city", now)  # known
    assert not key_index.add_alias(db, ANN, "where i live", "city of residence", now)
    assert not key_index.add_alias(db, ANN, "home city", "home city", now)
    assert key_index.aliases(db, ANN) == {"city of residence": "home city"}


def test_the_keys_offered_put_those_relevant_to_the_turns_first() -> None:
    keys = [f"topic {i}" for i in range(500)] + ["home city", "favourite band"]
    offered = offered_keys(keys, "My favourite band is Blur now", ["home city"], budget=60)
    assert offered[:2] == ["home city", "favourite band"]  # a found memory's, then by words
    assert offered[2] == "topic 0"  # then the most used
    assert len(offered) < len(keys)  # within the budget


def test_a_fold_reads_its_changes_through_the_index_of_unfolded_rows(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A fold costs the changes since the last one, not the store's keys: SQLite uses the
    partial index only when the statement states its condition as the index does."""
    settings = make_settings("sqlite", tmp_path, request)
    engine = get_engine(settings.storage)
    with session_scope(settings.storage) as db, statements_sent(engine) as sent:
        noted(db, settings, "pet", 1)
        db.flush()
        key_index.fold(db, 1000)
    statement, parameters = sent_with(sent, "FROM subject_keys", "ORDER BY subject_keys.id")
    with engine.connect() as conn:
        plan = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).all()
    assert "USING INDEX ix_subject_keys_unfolded" in str(plan), plan
