"""Every task is bounded in time: Celery's limits for the prefork pool, and a check
between batches that holds under every pool. A batch the soft limit interrupts gives its
turns back without counting an attempt."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.extraction.batch import TIME_LIMIT, extract_session
from memoryd.extraction.extractors import OfflineExtractor
from memoryd.extraction.views import Proposal, TurnView
from memoryd.models.tables import ExtractionBatch, Turn
from memoryd.settings import Settings
from memoryd.worker.config import celery_config
from tests.extraction.test_poison import KEY, LINES, say


class Interrupted(OfflineExtractor):
    """What the prefork pool does at the soft limit: raises inside the running call."""

    def extract(
        self,
        turns: Sequence[TurnView],
        memories: Sequence[Any],
        profiles: Any = None,
        keys: Sequence[str] = (),
    ) -> Proposal:
        raise SoftTimeLimitExceeded()


def test_a_batch_stopped_at_the_soft_limit_gives_its_turns_back_uncounted(
    settings: Settings, db: Session
) -> None:
    s = settings.updated(**{"max_attempts": 1, "batch_size": 12})
    say(s)
    stats = extract_session(s, KEY, extractor=Interrupted())
    assert stats.failed_batches == 1 and stats.dead_lettered == 0
    turns = db.scalars(select(Turn)).all()
    assert {(t.status, t.attempts) for t in turns} == {("pending", 0)}
    batch = db.scalars(select(ExtractionBatch)).one()
    assert (batch.status, batch.error_kind, batch.error) == ("failed", "transient", TIME_LIMIT)


def test_a_task_past_its_soft_limit_starts_no_new_batch(settings: Settings, db: Session) -> None:
    s = settings.updated(
        **{
            "batch_size": 3,
            "extract_batches_per_task": 5,
            "task_soft_time_limit_seconds": 1e-6,
        }
    )
    say(s)
    stats = extract_session(s, KEY)
    assert (stats.batches, stats.more_pending) == (1, True)  # the rest in a fresh task
    done = db.scalars(select(Turn).where(Turn.status == "done")).all()
    assert len(done) == 3 < len(LINES)


def test_every_task_has_both_celery_time_limits(settings: Settings) -> None:
    conf = celery_config(settings)
    assert (conf["task_soft_time_limit"], conf["task_time_limit"]) == (600.0, 660.0)


def test_the_hard_limit_must_leave_room_after_the_soft_one() -> None:
    with pytest.raises(ValidationError, match="MEMORYD_TASK_TIME_LIMIT_SECONDS must be above"):
        Settings(task_soft_time_limit_seconds=600, task_time_limit_seconds=600)
