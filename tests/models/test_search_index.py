"""search_index.postings_deferred, a bulk load's way in: the memories loaded inside get
the postings the insert trigger would have written them, once, and the trigger works
again afterwards."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, text

from memoryd.client import MemoryClient
from memoryd.models import search_index
from memoryd.models.db import get_engine
from memoryd.models.tables import Memory
from memoryd.text import SLOT_WORDS, memory_search_text
from tests.conftest import make_settings

COLUMNS = [c.name for c in Memory.__table__.columns if c.name != "id"]


def _copy_of_anns(conn: Connection, user: str) -> None:
    """Ann's memories again, as `user`'s, in one INSERT … SELECT (no trigger of its own)."""
    names = ", ".join(COLUMNS)
    values = ", ".join(":user" if c == "user_id" else c for c in COLUMNS)
    copied = f"INSERT INTO memories ({names}) SELECT {values} FROM memories WHERE user_id = 'ann'"
    conn.execute(text(copied), {"user": user})


def _postings(conn: Connection, user: str) -> list[tuple[str, int, int]]:
    rows = conn.execute(
        text(
            "SELECT term, tf, search_length FROM memory_terms WHERE user_id = :user "
            "ORDER BY term, tf, search_length"
        ),
        {"user": user},
    )
    return [tuple(row) for row in rows]


def test_a_deferred_load_gets_the_postings_the_trigger_writes(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    settings = make_settings(backend, tmp_path, request)
    client = MemoryClient(settings, dispatch=False)
    client.remember("a", "ann", "Prefers green tea in the morning")  # through the trigger
    client.remember("a", "ann", "Is learning Portuguese for a move to Lisbon")
    engine = get_engine(settings.storage)
    for user in ("bob", "cy"):  # a second load leaves the first one's postings alone
        with engine.begin() as conn, search_index.postings_deferred(conn):
            _copy_of_anns(conn, user)
    client.remember("a", "dan", "Prefers green tea in the morning")  # the trigger again
    with engine.connect() as conn:
        anns = _postings(conn, "ann")
        assert anns and _postings(conn, "bob") == anns == _postings(conn, "cy")
        assert _postings(conn, "dan")
    assert [hit.content for hit in client.recall("Lisbon", "a", "cy")] == [
        "Is learning Portuguese for a move to Lisbon"
    ]


# What today's term rules make of the bench datasets' texts, under each slot name. A
# store keeps the terms of the rules it was written (or last reindexed) by, and queries
# are split by today's: when this digest changes, add a migration that calls
# search_index.reindex_terms (as 0030 does), then write the new digest here.
TERM_RULES_DIGEST = "e6007c1e19c05a3b848b3c2d89c5420148baa916fe60e419c40312ab84f9c241"
DATA = Path(__file__).resolve().parents[2] / "bench" / "data"


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict | list):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _strings(item)


def test_the_term_rules_are_those_the_last_reindex_applied() -> None:
    names = ["", *SLOT_WORDS, "Home  City."]
    digest = hashlib.sha256()
    texts = 0
    for dataset in ("madial_en", "madial_zh", "realmem"):
        with gzip.open(DATA / f"{dataset}.json.gz", "rt", encoding="utf-8") as f:
            for text_ in (s for s in _strings(json.load(f)) if len(s) > 3):
                digest.update(memory_search_text(names[texts % len(names)], text_).encode())
                digest.update(b"\n")
                texts += 1
    assert texts > 10_000
    assert digest.hexdigest() == TERM_RULES_DIGEST, (
        "the term rules changed: stored memories keep the old terms until a migration "
        "calls search_index.reindex_terms; add one, then update TERM_RULES_DIGEST"
    )
