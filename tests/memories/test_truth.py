"""One truth per memory: a content edit leaves no stale title, a no-op edit writes
nothing (issue 21, item 2)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.errors import MemoryRejected
from memoryd.memories.transfer import import_memories
from memoryd.models.db import utcnow
from memoryd.settings import Settings
from tests.factories import make_memory

ALL = ["active", "superseded", "archived", "expired", "deleted"]


def test_a_content_edit_drops_a_title_that_copied_the_old_text(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    memory = client.remember("bot", "ann", "Vegetarian since 2020")
    edited = client.update("bot", "ann", memory.id, content="Vegan since 2024")
    assert edited.name == ""
    block = client.build_context("vegan or vegetarian since when", "bot", "ann")
    assert "Vegan since 2024" in block
    assert "Vegetarian" not in block
    # The old word is no longer a search term (trigram similarity may still list it).
    assert [h.parts.keyword_rank for h in client.recall("vegetarian", "bot", "ann")] == [None]


def test_a_content_edit_drops_a_legacy_cut_title_and_keeps_a_real_key(
    settings: Settings, db: Session
) -> None:
    long_text = "Went hiking in the Serra da Estrela with her two brothers last spring"
    legacy = make_memory(db, settings, long_text, name=long_text[:60])
    keyed = make_memory(db, settings, "Vegetarian since 2020", name="diet")
    db.commit()
    client = MemoryClient(settings, dispatch=False)
    assert client.update("bot", "ann", legacy.id, content="Went hiking in Gerês").name == ""
    assert all(h.parts.keyword_rank is None for h in client.recall("estrela", "bot", "ann"))
    assert client.update("bot", "ann", keyed.id, content="Vegan since 2024").name == "diet"
    assert client.update("bot", "ann", keyed.id, name="food").name == "food"


def test_an_edit_that_changes_nothing_writes_nothing(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    memory = client.remember("bot", "ann", "Drinks coffee black", name="coffee", tags=["drink"])
    same = client.update(
        "bot", "ann", memory.id, content="Drinks coffee black", name="coffee", tags=["drink"]
    )
    nothing = client.update("bot", "ann", memory.id)
    assert same.updated_at == nothing.updated_at == memory.updated_at
    assert [e.kind for e in client.history("bot", "ann", memory.id)] == ["created"]


def test_blank_content_is_refused_everywhere_with_the_same_words(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    memory = client.remember("bot", "ann", "Prefers tea")
    with pytest.raises(MemoryRejected, match=r"^content: content is blank$"):
        client.remember("bot", "ann", "   ")
    with pytest.raises(MemoryRejected, match=r"^content: content is blank$"):
        client.update("bot", "ann", memory.id, content="\n\t ")
    for arguments in (
        {"action": "create", "content": "  "},
        {"action": "update", "id": memory.id, "content": " "},
    ):
        answer = client.execute_tool("bot", "ann", "memory_save", arguments)
        assert answer == {"ok": False, "error": "content: content is blank"}
    assert [m.content for m in client.list("bot", "ann")] == ["Prefers tea"]


def test_import_refuses_blank_content_naming_the_line_and_field(settings: Settings) -> None:
    lines = [json.dumps({"agent_id": "bot", "user_id": "ann", "content": c}) for c in (" ", "  ")]
    result = import_memories(settings, lines, utcnow())
    assert result["imported"] == 0
    assert result["errors"] == [
        "line 1: content: content is blank",
        "line 2: content: content is blank",
    ]
    assert MemoryClient(settings, dispatch=False).list("bot", "ann", statuses=ALL) == []


def test_saving_a_memory_again_never_lowers_its_confidence(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    first, created = client.save("bot", "ann", "Allergic to peanuts")
    again, created_again = client.save("bot", "ann", "allergic to peanuts.")
    assert (created, created_again, again.id) == (True, False, first.id)
    assert (first.confidence, again.confidence, again.evidence_count) == (1.0, 1.0, 2)
