"""The search structures the ORM does not model, for both databases.

- Keyword postings (`memory_terms`, modelled as MemoryTerm) are written by triggers from
  `memories.search_text` while a memory is active, so every write path (the store,
  imports, bulk status changes, a migration) keeps them right without Python's help.
- Trigram candidates of a large scope come from the database: pg_trgm's word-similarity
  KNN search on PostgreSQL, an FTS5 table with the trigram tokenizer on SQLite.

Migrations call `install` after any change that rebuilds the memories table (SQLite
rebuilds drop its triggers).
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from memoryd.text import search_text

# Terms are letters and digits only (text.search_tokens), so splitting on spaces is exact
# and the JSON array built from them on SQLite needs no escaping.
_PG_FUNCTION = """
CREATE OR REPLACE FUNCTION memoryd_index_terms() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM memory_terms WHERE memory_id = OLD.id;
    END IF;
    IF NEW.status = 'active' THEN
        INSERT INTO memory_terms (agent_id, user_id, term, memory_id, tf)
        SELECT NEW.agent_id, NEW.user_id, t, NEW.id, count(*)
        FROM regexp_split_to_table(NEW.search_text, ' ') AS t
        WHERE t <> '' GROUP BY t;
    END IF;
    RETURN NULL;
END $$
"""
# A large scope's trigram candidates are its memories nearest the query by pg_trgm's word
# similarity, read in distance order from this index (a KNN search). The scope's columns
# lead it (btree_gist), so a search walks one scope, however large the table.
PG_TRIGRAM_INDEX = (
    "CREATE INDEX IF NOT EXISTS ix_memories_scope_trgm ON memories USING gist "
    "(agent_id, user_id, (name || ' ' || content) gist_trgm_ops(siglen=256))"
)
PG_INSTALL = [
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    "CREATE EXTENSION IF NOT EXISTS btree_gist",
    PG_TRIGRAM_INDEX,
    _PG_FUNCTION,
    "DROP TRIGGER IF EXISTS memories_terms_insert ON memories",
    "DROP TRIGGER IF EXISTS memories_terms_update ON memories",
    """CREATE TRIGGER memories_terms_insert AFTER INSERT ON memories
       FOR EACH ROW EXECUTE FUNCTION memoryd_index_terms()""",
    """CREATE TRIGGER memories_terms_update AFTER UPDATE OF search_text, status ON memories
       FOR EACH ROW WHEN (OLD.search_text IS DISTINCT FROM NEW.search_text
                          OR OLD.status IS DISTINCT FROM NEW.status)
       EXECUTE FUNCTION memoryd_index_terms()""",
]
PG_DROP = [
    "DROP INDEX IF EXISTS ix_memories_trgm",  # migrations 0008 and 0009
    "DROP INDEX IF EXISTS ix_memories_scope_trgm",
    "DROP TRIGGER IF EXISTS memories_terms_insert ON memories",
    "DROP TRIGGER IF EXISTS memories_terms_update ON memories",
    "DROP FUNCTION IF EXISTS memoryd_index_terms()",
]

_SQLITE_TERMS = """
    INSERT INTO memory_terms (agent_id, user_id, term, memory_id, tf)
    SELECT new.agent_id, new.user_id, value, new.id, count(*)
    FROM json_each('["' || replace(new.search_text, ' ', '","') || '"]')
    WHERE new.status = 'active' AND value <> '' GROUP BY value;
"""
_SQLITE_TRIGRAMS = """
    INSERT INTO memories_trgm (rowid, body)
    SELECT new.id, new.name || ' ' || new.content WHERE new.status = 'active';
"""
_SQLITE_FORGET = """
    DELETE FROM memory_terms WHERE memory_id = old.id;
    DELETE FROM memories_trgm WHERE rowid = old.id;
"""
SQLITE_TRIGGERS = ("memories_search_insert", "memories_search_update", "memories_search_delete")
SQLITE_INSTALL = [
    "CREATE VIRTUAL TABLE IF NOT EXISTS memories_trgm USING fts5(body, tokenize='trigram')",
    *(f"DROP TRIGGER IF EXISTS {name}" for name in SQLITE_TRIGGERS),
    f"""CREATE TRIGGER memories_search_insert AFTER INSERT ON memories BEGIN
        {_SQLITE_TERMS} {_SQLITE_TRIGRAMS}
    END""",
    f"""CREATE TRIGGER memories_search_update
        AFTER UPDATE OF search_text, status, name, content ON memories BEGIN
        {_SQLITE_FORGET} {_SQLITE_TERMS} {_SQLITE_TRIGRAMS}
    END""",
    f"""CREATE TRIGGER memories_search_delete AFTER DELETE ON memories BEGIN
        {_SQLITE_FORGET}
    END""",
]
SQLITE_DROP = [
    *(f"DROP TRIGGER IF EXISTS {name}" for name in SQLITE_TRIGGERS),
    "DROP TABLE IF EXISTS memories_trgm",
]

# The keyword index of migrations 0003 to 0007 (FTS5 over search_text), for downgrades.
FTS_LEGACY_TRIGGERS = [
    """CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts(rowid, search_text) VALUES (new.id, new.search_text);
    END""",
    """CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, search_text)
        VALUES ('delete', old.id, old.search_text);
    END""",
    """CREATE TRIGGER memories_fts_update AFTER UPDATE OF search_text ON memories BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, search_text)
        VALUES ('delete', old.id, old.search_text);
        INSERT INTO memories_fts(rowid, search_text) VALUES (new.id, new.search_text);
    END""",
]

# Fill the structures from rows written before the triggers existed.
PG_REBUILD = [
    "DELETE FROM memory_terms",
    """INSERT INTO memory_terms (agent_id, user_id, term, memory_id, tf)
       SELECT m.agent_id, m.user_id, t, m.id, count(*)
       FROM memories AS m, regexp_split_to_table(m.search_text, ' ') AS t
       WHERE m.status = 'active' AND t <> '' GROUP BY m.agent_id, m.user_id, t, m.id""",
]
SQLITE_REBUILD = [
    "DELETE FROM memory_terms",
    """INSERT INTO memory_terms (agent_id, user_id, term, memory_id, tf)
       SELECT m.agent_id, m.user_id, j.value, m.id, count(*)
       FROM memories AS m, json_each('["' || replace(m.search_text, ' ', '","') || '"]') AS j
       WHERE m.status = 'active' AND j.value <> '' GROUP BY m.id, j.value""",
    "DELETE FROM memories_trgm",
    """INSERT INTO memories_trgm (rowid, body)
       SELECT id, name || ' ' || content FROM memories WHERE status = 'active'""",
]


def _run(bind: Connection, statements: list[str]) -> None:
    for statement in statements:
        bind.execute(text(statement))


def reindex_terms(bind: Connection, chunk: int = 5000) -> None:
    """Re-derive every memory's search terms and length (after the term rules change)."""
    last = 0
    while True:
        rows = bind.execute(
            text("SELECT id, name, content FROM memories WHERE id > :last ORDER BY id LIMIT :n"),
            {"last": last, "n": chunk},
        ).all()
        if not rows:
            return
        updates = []
        for row in rows:
            terms = search_text(f"{row.name} {row.content}")
            updates.append({"id": row.id, "t": terms, "n": len(terms.split())})
        bind.execute(
            text("UPDATE memories SET search_text = :t, search_length = :n WHERE id = :id"),
            updates,
        )
        last = rows[-1].id


def install(bind: Connection) -> None:
    """Create (or re-create) the triggers and trigram structures, then fill them."""
    postgres = bind.dialect.name == "postgresql"
    _run(bind, PG_INSTALL if postgres else SQLITE_INSTALL)
    _run(bind, PG_REBUILD if postgres else SQLITE_REBUILD)


def uninstall(bind: Connection) -> None:
    _run(bind, PG_DROP if bind.dialect.name == "postgresql" else SQLITE_DROP)
