"""The page's review queue, conflict resolution and clean-up, as plain functions."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.errors import NotFound
from memoryd.memories import conflicts, review
from memoryd.models.db import session_scope, utcnow
from memoryd.models.tables import MemoryStatus, Tier
from memoryd.settings import Settings
from tests.factories import make_memory


def test_keeping_the_new_side_closes_the_conflict_and_keeping_the_old_one_swaps_them(
    settings: Settings,
) -> None:
    client = MemoryClient(settings, dispatch=False)
    old = client.remember("bot", "ann", "Lives in Lisbon")
    new = client.remember("bot", "ann", "Lives in Porto", replaces=old.id)
    with session_scope(settings.storage) as session:
        assert [(c.old.id, c.new.id) for c in conflicts.open_conflicts(session)] == [
            (old.id, new.id)
        ]
        conflicts.resolve(session, settings.memories, old.id, "old", utcnow())
    assert client.get("bot", "ann", old.id).status == MemoryStatus.ACTIVE
    assert client.get("bot", "ann", new.id).status == MemoryStatus.SUPERSEDED
    assert [e.kind for e in client.history("bot", "ann", old.id)][-1] == "restored"
    with session_scope(settings.storage, readonly=True) as session:
        assert conflicts.count_open(session) == 0  # the swapped pair is reviewed too

    third = client.remember("bot", "ann", "Lives in Faro", replaces=old.id)
    with session_scope(settings.storage) as session:
        conflicts.resolve(session, settings.memories, old.id, "new", utcnow())
        assert conflicts.count_open(session) == 0
        with pytest.raises(NotFound):
            conflicts.resolve(session, settings.memories, third.id, "new", utcnow())


def test_approving_promotes_and_declining_deletes(settings: Settings) -> None:
    with session_scope(settings.storage) as session:
        unsure = make_memory(session, settings, "Maybe likes jazz", confidence=0.65).id
        doubtful = make_memory(session, settings, "Maybe likes opera", confidence=0.62).id
        make_memory(session, settings, "Sure of this", confidence=0.95)
    with session_scope(settings.storage) as session:
        queue = review.review_queue(session, settings.extraction)
        assert [m.id for m in queue] == [doubtful, unsure]
        approved = review.approve(session, settings, unsure, utcnow())
        declined = review.decline(session, doubtful, utcnow())
    assert (approved.tier, approved.confidence) == (
        Tier.LONG,
        settings.extraction.long_term_confidence,
    )
    assert declined.status == MemoryStatus.DELETED
    with session_scope(settings.storage, readonly=True) as session:
        assert review.review_queue(session, settings.extraction) == []


def test_clean_up_expires_what_ends_within_a_day(settings: Settings, db: Session) -> None:
    now = utcnow()
    with session_scope(settings.storage) as session:
        soon = make_memory(session, settings, "Tired today", confidence=0.7, temporary="mood")
        later = make_memory(session, settings, "Trip next week", confidence=0.7)
        soon_id, later_id = soon.id, later.id
    with session_scope(settings.storage) as session:
        assert review.expire_soon(session, now + timedelta(minutes=1)) == 1
    client = MemoryClient(settings, dispatch=False)
    assert client.get("bot", "ann", soon_id).status == MemoryStatus.EXPIRED
    assert client.get("bot", "ann", later_id).status == MemoryStatus.ACTIVE
