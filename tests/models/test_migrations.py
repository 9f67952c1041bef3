"""The migrations build exactly the schema the models describe, on both databases."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from alembic import command
from sqlalchemy import bindparam, text
from sqlalchemy.exc import DBAPIError

from memoryd.client import MemoryClient
from memoryd.models import search_index
from memoryd.models.db import get_engine, session_scope, utcnow
from memoryd.models.migrate import alembic_config
from memoryd.models.tables import BatchTotal
from memoryd.monitoring.figures import pipeline_figures
from memoryd.settings import Settings
from memoryd.text import memory_search_text
from tests.factories import turn_item


def test_models_and_migrations_agree(settings: Settings) -> None:
    command.check(alembic_config(settings))  # raises if autogenerate would change anything


def test_downgrade_and_upgrade_again(tmp_path) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'm.db'}", data_dir=tmp_path)
    command.upgrade(alembic_config(settings), "head")
    command.downgrade(alembic_config(settings), "base")
    command.upgrade(alembic_config(settings), "head")
    command.check(alembic_config(settings))


def test_the_search_triggers_survive_every_step(tmp_path) -> None:
    """SQLite rebuilds a table to drop a column, and its triggers go with it: every
    migration that rebuilds memories re-installs them."""
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'm.db'}", data_dir=tmp_path)
    command.upgrade(alembic_config(settings), "head")
    MemoryClient(settings, dispatch=False).remember("bot", "ann", "Prefers green tea")
    command.downgrade(alembic_config(settings), "0008")
    with get_engine(settings.storage).begin() as conn:
        triggers = conn.scalars(
            text("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name")
        ).all()
        assert triggers == [
            "memories_search_delete",
            "memories_search_insert",
            "memories_search_update",
        ]
        conn.execute(text("UPDATE memories SET search_text = 'oolong', name = 'oolong'"))
        assert conn.scalars(text("SELECT term FROM memory_terms")).all() == ["oolong"]
    command.upgrade(alembic_config(settings), "head")
    assert MemoryClient(settings, dispatch=False).recall("oolong", "bot", "ann")


def test_the_upgrade_gives_existing_postings_their_memorys_length(settings: Settings) -> None:
    """0012 moves each memory's length into its postings, where BM25 reads it."""
    config = alembic_config(settings)
    # Written before the downgrade: the application's tables are the head's.
    MemoryClient(settings, dispatch=False).remember(
        "bot", "ann", "Prefers green tea, hot", name="tea"
    )
    command.downgrade(config, "0011")
    with (
        pytest.raises(DBAPIError, match="search_length"),
        get_engine(settings.storage).begin() as conn,
    ):
        conn.execute(text("SELECT search_length FROM memory_terms"))  # left with 0012
    command.upgrade(config, "head")
    with get_engine(settings.storage).begin() as conn:
        lengths = conn.execute(
            text(
                "SELECT t.term, t.search_length, m.search_length FROM memory_terms AS t "
                "JOIN memories AS m ON m.id = t.memory_id ORDER BY t.term"
            )
        ).all()
    assert [tuple(row) for row in lengths] == [
        ("green", 5, 5),  # name and content
        ("hot", 5, 5),
        ("prefer", 5, 5),
        ("tea", 5, 5),
    ]


def test_the_upgrade_keys_existing_memories_by_their_names(settings: Settings) -> None:
    """0013 gives each memory the subject key of its name; a name that only repeats the
    content (older rows, saves without a name) is no key."""
    client = MemoryClient(settings, dispatch=False)
    client.remember("bot", "ann", "Lives in Lisbon", name="Home  City.")
    client.remember("bot", "ann", "Likes green tea in the morning", name="Likes green tea")
    client.remember("bot", "ann", "Employer is Acme", name="Employer")
    with get_engine(settings.storage).begin() as conn:  # as rows from before 0013 hold them
        conn.execute(text("UPDATE memories SET name = content WHERE name = 'Likes green tea'"))
    config = alembic_config(settings)
    command.downgrade(config, "0012")
    command.upgrade(config, "head")
    with get_engine(settings.storage).begin() as conn:
        keys = conn.execute(text("SELECT content, name_key FROM memories ORDER BY id")).all()
    assert [tuple(row) for row in keys] == [
        ("Lives in Lisbon", "home city"),
        ("Likes green tea in the morning", ""),
        ("Employer is Acme", "employer"),
    ]


def test_the_upgrade_marks_the_sessions_due_for_compression(settings: Settings) -> None:
    """0020: sessions whose unsummarised turns pass the trigger are due at once."""
    client = MemoryClient(settings, dispatch=False)
    for session, count in (("long", 30), ("short", 2)):
        client.enqueue_turns(
            [
                {
                    "agent_id": "bot",
                    "user_id": "ann",
                    "session_id": session,
                    "role": "user",
                    "content": f"turn {i} " + "word " * 200,
                }
                for i in range(count)
            ]
        )
    config = alembic_config(settings)
    command.downgrade(config, "0019")
    command.upgrade(config, "head")
    with get_engine(settings.storage).begin() as conn:
        due = conn.execute(text("SELECT session_id, compress_due FROM sessions ORDER BY 1")).all()
    assert [(name, bool(flag)) for name, flag in due] == [("long", True), ("short", False)]


def test_a_downgrade_adds_each_status_kinds_totals_together(settings: Settings) -> None:
    """0023 down: extraction's and compression's totals of a status become one row,
    their figures added, so the totals never go back."""
    with session_scope(settings.storage) as session:
        for kind, batches, calls, rejected in (("extract", 5, 4, 2), ("compress", 3, 6, 1)):
            session.add(
                BatchTotal(
                    status="done",
                    kind=kind,
                    batches=batches,
                    llm_calls=calls,
                    tokens_in=10,
                    tokens_out=1,
                    facts_proposed=0,
                    facts_accepted=0,
                    rejections={"low_confidence": rejected},
                )
            )
    config = alembic_config(settings)
    command.downgrade(config, "0022")
    with get_engine(settings.storage).begin() as conn:
        rows = conn.execute(
            text("SELECT status, batches, llm_calls, tokens_in, rejections FROM batch_totals")
        ).all()
    command.upgrade(config, "head")
    ((status, batches, calls, tokens_in, rejections),) = rows
    assert (status, batches, calls, tokens_in) == ("done", 8, 10, 20)
    if isinstance(rejections, str):  # SQLite hands JSON back as text
        rejections = json.loads(rejections)
    assert rejections == {"low_confidence": 3}


def test_the_upgrade_ages_waiting_turns_from_the_turns_stored_before_them(
    settings: Settings,
) -> None:
    """0024: when earlier turns were received is not known. A turn still waiting counts
    from the latest timestamp of the turns up to its own, so an import stamped two days
    ago that arrived after a turn said five minutes ago has waited five minutes."""
    client = MemoryClient(settings, dispatch=False)
    now = utcnow()
    for i, said in enumerate((now - timedelta(minutes=5), now - timedelta(days=2))):
        client.enqueue_turns([turn_item(i, timestamp=said.isoformat())])
    config = alembic_config(settings)
    command.downgrade(config, "0023")
    command.upgrade(config, "head")
    with session_scope(settings.storage) as session:
        figures = pipeline_figures(session, now)
    assert figures.pending_turns == 2
    assert 299 <= figures.oldest_pending_seconds <= 301


def test_the_upgrade_gives_memories_the_terms_of_todays_rules(settings: Settings) -> None:
    """0030: stores from before two rule changes (Chinese stop characters, a slot's
    words) held terms no query is split into any more, and lacked the slot's words."""
    client = MemoryClient(settings, dispatch=False)
    client.remember("bot", "ann", "Vegetarian since 2019", name="diet")
    client.remember("bot", "ann", "Bart在圣诞节晚会上跳舞")
    client.remember("bot", "ann", "Prefers green tea")
    stale = {
        "Vegetarian since 2019": "diet vegetarian 2019",
        "Bart在圣诞节晚会上跳舞": "bart 晚 会 上",
    }
    with get_engine(settings.storage).begin() as conn:  # the terms of the older rules
        conn.execute(
            text("UPDATE memories SET search_text = :t, search_length = 3 WHERE content = :c"),
            [{"c": content, "t": terms} for content, terms in stale.items()],
        )
    assert not client.recall("what food does she eat", "bot", "ann")
    command.downgrade(alembic_config(settings), "0029")
    command.upgrade(alembic_config(settings), "head")
    with get_engine(settings.storage).begin() as conn:
        stored = conn.execute(
            text("SELECT name, content, search_text, search_length FROM memories")
        ).all()
        terms = set(conn.scalars(text("SELECT term FROM memory_terms")).all())
    for name, content, search_text, length in stored:
        assert search_text == memory_search_text(name, content)
        assert length == len(search_text.split())
    assert {"food", "eat", "晚会"} <= terms and "上" not in terms
    with get_engine(settings.storage).begin() as conn:  # a store up to date costs no write
        assert search_index.reindex_terms(conn) == 0
    assert [hit.content for hit in client.recall("what food does she eat", "bot", "ann")] == [
        "Vegetarian since 2019"
    ]


def test_often_updated_tables_keep_room_on_their_pages(backend: str, settings: Settings) -> None:
    """PostgreSQL leaves room on each new page of sessions (0032) and memories (0011)
    for their rows' next versions, so that their updates can be HOT; a downgrade
    gives sessions full pages again."""
    if backend != "postgres":
        pytest.skip("a PostgreSQL storage parameter")
    options = text("SELECT relname, reloptions FROM pg_class WHERE relname IN :tables")
    options = options.bindparams(bindparam("tables", expanding=True))
    tables = {"tables": ["sessions", "memories"]}

    def room() -> dict[str, list[str]]:
        """Each table's fillfactor among its storage parameters (the suite turns
        autovacuum off on some)."""
        with get_engine(settings.storage).connect() as conn:
            found = conn.execute(options, tables).all()
        return {
            name: [o for o in params or [] if o.startswith("fillfactor=")] for name, params in found
        }

    assert room() == {"sessions": ["fillfactor=70"], "memories": ["fillfactor=85"]}
    command.downgrade(alembic_config(settings), "0031")
    assert room() == {"sessions": [], "memories": ["fillfactor=85"]}
    command.upgrade(alembic_config(settings), "head")
    assert room()["sessions"] == ["fillfactor=70"]
