"""What a recall writes: its feedback changes the memory rows in place."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from memoryd.models.db import utcnow
from memoryd.models.tables import Memory, Tier
from memoryd.recall.usage import record_access
from memoryd.settings import Settings
from tests.factories import make_memory


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_recall_feedback_rewrites_rows_in_place(settings: Settings, db: Session) -> None:
    """No index holds a column that a retrieval changes, so PostgreSQL updates the row
    in place (HOT) and writes no index entry; an index on access_count, weight or the
    like would make every recall write into every index of the table again."""
    settings = settings.model_copy(update={"promote_access_count": 10})
    long = make_memory(db, settings, "Prefers tea")
    short = make_memory(db, settings, "Reading Dune", confidence=0.7)
    assert (long.tier, short.tier) == (Tier.LONG, Tier.SHORT)
    db.commit()
    hour = utcnow().replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    record_access(db, settings, [long.id, short.id], hour + timedelta(minutes=5))  # TTL moves
    db.commit()
    before = _updates(db)  # in one transaction: no statistics are flushed meanwhile
    for minute in range(10, 40, 10):  # the same hour: every column that changes is unindexed
        record_access(db, settings, [long.id, short.id], hour + timedelta(minutes=minute))
    updated, in_place = (after - then for after, then in zip(_updates(db), before, strict=True))
    assert (updated, in_place) == (6, 6)
    db.commit()
    db.expire_all()
    assert [db.get_one(Memory, m.id).access_count for m in (long, short)] == [4, 4]


def _updates(db: Session) -> tuple[int, int]:
    """Rows of memories updated, and of those in place, as this backend counts them."""
    counts = db.execute(
        text(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables "
            "WHERE relname = 'memories'"
        )
    ).one()
    return int(counts.n_tup_upd), int(counts.n_tup_hot_upd)
