"""The subject keys a prompt lists: bounded by a window of the newest keyed memories,
whatever the scope's size, and reused a while when that window is full."""

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


def keyed(db: Session, settings: Settings, key: str, minutes_ago: int, user: str = "ann") -> None:
    when = utcnow() - timedelta(minutes=minutes_ago)
    text = f"About {key}, noted {minutes_ago} minutes ago"
    make_memory(db, settings, text, user_id=user, name=key, name_key=key, updated_at=when)


def test_the_keys_listed_are_the_most_used_of_the_newest_keyed_memories(
    settings: Settings, db: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(subjects, "KEY_WINDOW", 4)
    for minutes_ago in (90, 80, 70):
        keyed(db, settings, "employer", minutes_ago)  # the most used, but the oldest
    for minutes_ago, key in ((40, "pet"), (30, "home city"), (20, "home city"), (10, "pet")):
        keyed(db, settings, key, minutes_ago)
    db.commit()
    assert scope_keys(db, ANN, 60) == ["home city", "pet"]
    assert scope_keys(db, ANN, 1) == ["home city"]


def test_a_full_window_is_reused_a_while_and_a_small_scope_is_read_each_time(
    settings: Settings, db: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(subjects, "KEY_WINDOW", 2)
    keyed(db, settings, "pet", 20)
    keyed(db, settings, "home city", 10)
    keyed(db, settings, "employer", 10, user="bob")
    db.commit()
    assert scope_keys(db, ANN, 60) == ["home city", "pet"]
    assert scope_keys(db, Scope("bot", "bob"), 60) == ["employer"]
    keyed(db, settings, "gym", 5)
    keyed(db, settings, "gym", 5, user="bob")
    db.commit()
    assert scope_keys(db, ANN, 60) == ["home city", "pet"]  # reused: its window was full
    assert scope_keys(db, Scope("bot", "bob"), 60) == ["employer", "gym"]  # read again
    subjects._recent_keys.clear()
    assert scope_keys(db, ANN, 60) == ["gym", "home city"]
