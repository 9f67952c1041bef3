"""Export and import: idempotent, with each memory's history (issue 21, item 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.client import MemoryClient
from memoryd.memories.transfer import export_memories, import_memories
from memoryd.models.db import session_scope, utcnow
from memoryd.settings import Settings
from tests.conftest import make_settings

ALL = ["active", "superseded", "archived", "expired", "deleted"]


def export(settings: Settings) -> list[str]:
    with session_scope(settings, readonly=True) as session:
        return list(export_memories(session, "bot", "ann"))


def load(settings: Settings, lines: list[str]) -> dict[str, object]:
    with session_scope(settings) as session:
        return import_memories(session, settings, lines, utcnow())


@pytest.fixture
def source(tmp_path: Path, request: pytest.FixtureRequest) -> Settings:
    """Another store, where the file comes from."""
    return make_settings("sqlite", tmp_path / "source", request)


def test_importing_a_stores_own_export_adds_nothing(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    client.remember("bot", "ann", "Lives in Lisbon")
    gone = client.remember("bot", "ann", "Old hobby: chess")
    client.forget("bot", "ann", gone.id)
    lines = export(settings)
    for _ in range(2):
        assert load(settings, lines) == {"imported": 0, "skipped": 2, "errors": []}
    assert len(client.list("bot", "ann", statuses=ALL)) == 2


def test_an_import_keeps_the_history_and_a_second_one_adds_nothing(
    settings: Settings, source: Settings
) -> None:
    there = MemoryClient(source, dispatch=False)
    memory = there.remember("bot", "ann", "Drinks coffee black")
    there.update("bot", "ann", memory.id, content="Drinks coffee with oat milk")
    there.forget("bot", "ann", memory.id)
    lines = export(source)
    assert load(settings, lines) == {"imported": 1, "skipped": 0, "errors": []}
    assert load(settings, lines) == {"imported": 0, "skipped": 1, "errors": []}
    here = MemoryClient(settings, dispatch=False)
    [copy] = here.list("bot", "ann", statuses=ALL)
    assert (copy.status, copy.content) == ("deleted", "Drinks coffee with oat milk")
    history = here.history("bot", "ann", copy.id)
    assert [(e.kind, e.before_content, e.after_content) for e in history] == [
        ("created", None, "Drinks coffee black"),
        ("updated", "Drinks coffee black", "Drinks coffee with oat milk"),
        ("deleted", None, "Drinks coffee with oat milk"),
    ]
    original = there.history("bot", "ann", memory.id)
    assert [e.created_at for e in history] == [e.created_at for e in original]
    # The copy exported again still names the original: no third copy.
    assert load(settings, export(settings))["imported"] == 0


def test_an_export_from_before_history_and_identity_still_imports(
    settings: Settings, source: Settings
) -> None:
    there = MemoryClient(source, dispatch=False)
    there.remember("bot", "ann", "Allergic to peanuts")
    old = json.loads(export(source)[0])
    old.pop("history", None)  # what an export wrote before history was added
    bare = {"agent_id": "bot", "user_id": "ann", "content": "Plays the cello", "status": "deleted"}
    assert load(settings, [json.dumps(old), json.dumps(bare)])["imported"] == 2
    assert load(settings, [json.dumps(old)])["imported"] == 0  # the same memory, by its id
    here = MemoryClient(settings, dispatch=False)
    [peanuts] = here.list("bot", "ann")
    assert [e.kind for e in here.history("bot", "ann", peanuts.id)] == ["created"]
