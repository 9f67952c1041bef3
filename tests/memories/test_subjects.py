"""The subject keys a prompt lists: the most used among the scope's newest memories,
a window of fixed size whatever the scope's, read fresh for every batch."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.orm import Session

from memoryd.memories import subjects
from memoryd.memories.subjects import scope_keys
from memoryd.models.db import utcnow
from memoryd.models.keys import Scope
from memoryd.settings import Settings
from tests.factories import make_memory

ANN = Scope("bot", "ann")


def noted(db: Session, settings: Settings, key: str, minutes_ago: int, user: str = "ann") -> None:
    """A memory `minutes_ago` old, of subject `key` ('' for none)."""
    when = utcnow() - timedelta(minutes=minutes_ago)
    text = f"Noted {minutes_ago} minutes ago about {key or 'nothing in particular'}"
    make_memory(db, settings, text, user_id=user, name=key, name_key=key, updated_at=when)


def test_the_keys_listed_are_the_most_used_of_the_newest_memories(
    settings: Settings, db: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(subjects, "KEY_WINDOW", 5)
    for minutes_ago in (90, 80, 70):
        noted(db, settings, "employer", minutes_ago)  # the most used, but the oldest
    for minutes_ago, key in ((50, "pet"), (40, ""), (30, "home city"), (20, "home city")):
        noted(db, settings, key, minutes_ago)
    noted(db, settings, "pet", 10)
    noted(db, settings, "gym", 5, user="bob")  # another scope's
    db.commit()
    assert scope_keys(db, ANN, 60) == ["home city", "pet"]
    assert scope_keys(db, ANN, 1) == ["home city"]


def test_a_new_key_is_listed_for_the_next_batch(
    settings: Settings, db: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(subjects, "KEY_WINDOW", 5)  # a full window, as in a large scope
    for minutes_ago in range(30, 0, -1):
        noted(db, settings, "hobby", minutes_ago)
    db.commit()
    assert scope_keys(db, ANN, 60) == ["hobby"]
    noted(db, settings, "home city", 0)
    db.commit()
    assert scope_keys(db, ANN, 60) == ["hobby", "home city"]
