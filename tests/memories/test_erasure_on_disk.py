"""Erasure on SQLite leaves nothing on disk: the raw bytes of the database and of its
-wal and -shm files hold no trace of what the erased user said, nor do they after the
maintenance cycle purged a deleted memory. And a new database file is its owner's."""

from __future__ import annotations

import stat
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from memoryd.client import MemoryClient
from memoryd.extraction.batch import extract_session
from memoryd.maintenance.cycle import run_cycle
from memoryd.models.db import get_engine, utcnow
from memoryd.models.keys import SessionKey
from memoryd.settings import Settings
from memoryd.worker.filesystem_broker import filesystem_options

ON_SQLITE = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)

CANARY = "Quokkasaurus"  # said once, by the erased user only


def on_disk(settings: Settings, word: str) -> dict[str, int]:
    """How often `word` occurs in each of the database's files, as bytes."""
    database = Path(settings.storage.resolved_database_url.removeprefix("sqlite:///"))
    files = [database, database.with_name(database.name + "-wal")]
    files.append(database.with_name(database.name + "-shm"))
    return {f.name: f.read_bytes().count(word.encode()) for f in files if f.exists()}


@ON_SQLITE
def test_an_erased_users_words_are_nowhere_on_disk(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    said = f"My pet is a {CANARY} and I live in Lisbon."
    for user in ("ann", "bob"):
        text_ = said if user == "ann" else "I live in Porto."
        client.enqueue_turn(
            agent_id="bot", user_id=user, session_id="s1", role="user", content=text_
        )
        client.end_session("bot", user, "s1")
        extract_session(settings, SessionKey("bot", user, "s1"))
    client.remember("bot", "ann", f"Pet {CANARY} eats clover")
    client.recall(f"what does my {CANARY} eat?", "bot", "ann")  # logged with its query
    assert sum(on_disk(settings, CANARY).values()) > 0  # the check can see it

    client.erase("bot", "ann")
    assert on_disk(settings, CANARY) == {"memoryd.db": 0, "memoryd.db-wal": 0, "memoryd.db-shm": 0}
    assert [m.content for m in client.list("bot", "bob")] == ["Lives in Porto"]  # the rest stays


@ON_SQLITE
def test_a_purged_memory_leaves_the_wal_too(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    gone = client.remember("bot", "ann", f"Old pet {CANARY}")
    client.forget("bot", "ann", gone.id)
    counts = run_cycle(settings, utcnow() + timedelta(days=31))
    assert counts.purged == 1
    assert sum(on_disk(settings, CANARY).values()) == 0


def test_a_new_database_file_is_readable_by_its_owner_alone(tmp_path: Path) -> None:
    data = tmp_path / "data"
    fresh = Settings(data_dir=data, database_url=f"sqlite:///{data / 'new.db'}")
    with get_engine(fresh.storage).connect() as connection:
        connection.execute(text("CREATE TABLE t (x)"))
        connection.commit()
    for name in ("new.db", "new.db-wal"):
        assert stat.S_IMODE((data / name).stat().st_mode) == 0o600, name
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    broker = fresh.storage.broker_folder
    filesystem_options(broker, ["q"])
    for folder in (broker, broker / "queue", broker / "processed", broker / "control"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
