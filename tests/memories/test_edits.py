"""The direct memory API: remember, update, forget, restore, get, list, history, health."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.errors import NotFound
from memoryd.settings import Settings
from tests.factories import make_memory


def test_remember_is_long_term_and_deduplicated(settings: Settings) -> None:
    client = MemoryClient(settings)
    first = client.remember("bot", "ann", "Birthday is 3 May", name="birthday")
    again = client.remember("bot", "ann", "birthday is 3 may.")
    assert (first.tier, first.id) == ("long", again.id)
    assert again.evidence_count == 2
    assert [m.content for m in client.list("bot", "ann")] == ["Birthday is 3 May"]


def test_remember_promotes_a_short_tier_memory(settings: Settings, db: Session) -> None:
    short = make_memory(db, settings, "Learning Portuguese", confidence=0.7)
    db.commit()
    assert short.tier == "short"
    assert MemoryClient(settings).remember("bot", "ann", "Learning Portuguese").tier == "long"


def test_remember_can_replace(settings: Settings) -> None:
    client = MemoryClient(settings)
    old = client.remember("bot", "ann", "Works at Acme")
    new = client.remember("bot", "ann", "Works at Globex", replaces=old.id)
    assert client.get("bot", "ann", old.id).status == "superseded"
    assert client.get("bot", "ann", new.id).supersedes_id == old.id


def test_update_forget_restore_and_history(settings: Settings) -> None:
    client = MemoryClient(settings)
    memory = client.remember("bot", "ann", "Drinks coffee black")
    client.update("bot", "ann", memory.id, content="Drinks coffee with oat milk")
    assert client.recall("oat milk", "bot", "ann")[0].id == memory.id
    client.forget("bot", "ann", memory.id)
    assert client.recall("coffee", "bot", "ann") == []
    assert client.list("bot", "ann", statuses=["deleted"])[0].id == memory.id
    client.restore("bot", "ann", memory.id)
    history = client.history("bot", "ann", memory.id)
    assert [e.kind for e in history] == ["created", "updated", "deleted", "restored"]
    assert history[1].before_content == "Drinks coffee black"
    assert history[1].after_content == "Drinks coffee with oat milk"


def test_other_scopes_are_not_found(settings: Settings) -> None:
    client = MemoryClient(settings)
    memory = client.remember("bot", "ann", "Private note")
    for call in (client.get, client.forget, client.restore, client.history):
        with pytest.raises(NotFound):
            call("bot", "bob", memory.id)
        with pytest.raises(NotFound):
            call("other-agent", "ann", memory.id)
    with pytest.raises(NotFound):
        client.update("bot", "bob", memory.id, content="hijacked")
    assert client.get("bot", "ann", memory.id).content == "Private note"


def test_shared_scope_is_readable_by_every_user_but_not_theirs_to_change(
    settings: Settings,
) -> None:
    client = MemoryClient(settings)
    shared = client.remember("bot", "*", "Office closes at 6 pm on Fridays", shared=True)
    assert client.recall("office friday", "bot", "ann")[0].id == shared.id
    assert client.get("bot", "bob", shared.id).user_id == "*"
    with pytest.raises(NotFound):
        client.forget("bot", "bob", shared.id)
    assert client.recall("office", "other-agent", "ann") == []


def test_paging(settings: Settings, db: Session) -> None:
    for i in range(7):
        make_memory(db, settings, f"fact number {i}")
    db.commit()
    client = MemoryClient(settings)
    pages = [client.list("bot", "ann", limit=3, offset=o) for o in (0, 3, 6)]
    assert [len(p) for p in pages] == [3, 3, 1]
    assert len({m.id for p in pages for m in p}) == 7


def test_health_figures(settings: Settings, db: Session) -> None:
    make_memory(db, settings, "Long fact")
    make_memory(db, settings, "Feels tired", confidence=0.7, temporary="mood")
    make_memory(db, settings, "Old fact", status="superseded")
    make_memory(db, settings, "Other user's", user_id="bob")
    db.commit()
    health = MemoryClient(settings).health("bot", "ann")
    assert health.by_tier == {"long": 1, "short": 1}
    assert health.by_status == {"active": 2, "superseded": 1}
    assert (health.active, health.expiring_soon, health.conflicts_resolved) == (2, 1, 1)
    assert health.average_confidence is not None
    assert MemoryClient(settings).health().active == 3
