"""The search structures the ORM does not model, for both databases.

- Keyword postings (`memory_terms`, modelled as MemoryTerm) are written by triggers from
  `memories.search_text`, each with the memory's search_length, while the memory is
  active, so every write path (the store, imports, bulk status changes, a migration)
  keeps them right without Python's help.
- Until migration 0015, trigram candidates of a large scope came from pg_trgm's KNN
  search (a GiST index) on PostgreSQL and an FTS5 trigram table on SQLite; they now come
  from the postings (recall/trigrams.py). Older migrations still install their schema's
  structures (`trigrams=True`).

Migrations call `install` after any change that rebuilds the memories table (SQLite
rebuilds drop its triggers).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text
from sqlalchemy.engine import Connection

from memoryd.text import memory_search_text


# Each posting carries its memory's search_length, so BM25 over a scope reads the
# postings alone (an index-only scan, migration 0012). Migrations before 0012 install
# the triggers of their own schema, whose postings have no length: `lengths=False`.
def _postings(lengths: bool, memory: str) -> tuple[str, str]:
    """The columns a postings insert names, and what it adds after tf to the values of
    each posting of `memory` (the row's SQL name)."""
    if lengths:
        return "agent_id, user_id, term, memory_id, tf, search_length", f", {memory}.search_length"
    return "agent_id, user_id, term, memory_id, tf", ""


# Terms are letters and digits only (text.search_tokens), so splitting on spaces is exact
# and the JSON array built from them on SQLite needs no escaping.
def _pg_install(lengths: bool, trigrams: bool) -> list[str]:
    columns, length = _postings(lengths, "NEW")
    function = f"""
CREATE OR REPLACE FUNCTION memoryd_index_terms() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM memory_terms WHERE memory_id = OLD.id;
    END IF;
    IF NEW.status = 'active' THEN
        INSERT INTO memory_terms ({columns})
        SELECT NEW.agent_id, NEW.user_id, t, NEW.id, count(*){length}
        FROM regexp_split_to_table(NEW.search_text, ' ') AS t
        WHERE t <> '' GROUP BY t;
    END IF;
    RETURN NULL;
END $$
"""
    return [
        *(PG_TRIGRAM_INSTALL if trigrams else []),
        function,
        "DROP TRIGGER IF EXISTS memories_terms_insert ON memories",
        "DROP TRIGGER IF EXISTS memories_terms_update ON memories",
        """CREATE TRIGGER memories_terms_insert AFTER INSERT ON memories
           FOR EACH ROW EXECUTE FUNCTION memoryd_index_terms()""",
        """CREATE TRIGGER memories_terms_update
           AFTER UPDATE OF search_text, search_length, status ON memories
           FOR EACH ROW WHEN (OLD.search_text IS DISTINCT FROM NEW.search_text
                              OR OLD.search_length IS DISTINCT FROM NEW.search_length
                              OR OLD.status IS DISTINCT FROM NEW.status)
           EXECUTE FUNCTION memoryd_index_terms()""",
    ]


# A large scope's trigram candidates are its memories nearest the query by pg_trgm's word
# similarity, read in distance order from this index (a KNN search). The scope's columns
# lead it (btree_gist), so a search walks one scope, however large the table.
PG_TRIGRAM_INDEX = (
    "CREATE INDEX IF NOT EXISTS ix_memories_scope_trgm ON memories USING gist "
    "(agent_id, user_id, (name || ' ' || content) gist_trgm_ops(siglen=256))"
)
PG_TRIGRAM_INSTALL = [
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    "CREATE EXTENSION IF NOT EXISTS btree_gist",
    PG_TRIGRAM_INDEX,
]
PG_DROP = [
    "DROP INDEX IF EXISTS ix_memories_trgm",  # migrations 0008 and 0009
    "DROP INDEX IF EXISTS ix_memories_scope_trgm",
    "DROP TRIGGER IF EXISTS memories_terms_insert ON memories",
    "DROP TRIGGER IF EXISTS memories_terms_update ON memories",
    "DROP FUNCTION IF EXISTS memoryd_index_terms()",
]


SQLITE_TRIGGERS = ("memories_search_insert", "memories_search_update", "memories_search_delete")


def _sqlite_install(lengths: bool, trigrams: bool) -> list[str]:
    columns, length = _postings(lengths, "new")
    terms = f"""
        INSERT INTO memory_terms ({columns})
        SELECT new.agent_id, new.user_id, value, new.id, count(*){length}
        FROM json_each('["' || replace(new.search_text, ' ', '","') || '"]')
        WHERE new.status = 'active' AND value <> '' GROUP BY value;
    """
    # Before 0015 the FTS5 trigram table followed each memory's text too.
    grams = forget_grams = body = ""
    if trigrams:
        grams = """
            INSERT INTO memories_trgm (rowid, body)
            SELECT new.id, new.name || ' ' || new.content WHERE new.status = 'active';
        """
        forget_grams = "DELETE FROM memories_trgm WHERE rowid = old.id;"
        body = ", name, content"
    forget = f"DELETE FROM memory_terms WHERE memory_id = old.id; {forget_grams}"
    fts = "CREATE VIRTUAL TABLE IF NOT EXISTS memories_trgm USING fts5(body, tokenize='trigram')"
    return [
        *([fts] if trigrams else []),
        *(f"DROP TRIGGER IF EXISTS {name}" for name in SQLITE_TRIGGERS),
        f"""CREATE TRIGGER memories_search_insert AFTER INSERT ON memories BEGIN
            {terms} {grams}
        END""",
        f"""CREATE TRIGGER memories_search_update
            AFTER UPDATE OF search_text, search_length, status{body} ON memories
        BEGIN
            {forget} {terms} {grams}
        END""",
        f"""CREATE TRIGGER memories_search_delete AFTER DELETE ON memories BEGIN
            {forget}
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


def pg_postings_rebuild(lengths: bool = True, where: str = "TRUE") -> str:
    """The statement that writes the postings of the active memories `where` selects
    (SQL over `m`), for rows written while the triggers were off or did not exist.
    Grouped by the memory's primary key, the posting may name its other columns; written
    in the postings' key order, so their index is built packed: in hashed groups' order,
    bench/recall.py's store of 1M memories took 1,925 MB against 1,725 MB."""
    columns, length = _postings(lengths, "m")
    return f"""INSERT INTO memory_terms ({columns})
       SELECT m.agent_id, m.user_id, t, m.id, count(*){length}
       FROM memories AS m, regexp_split_to_table(m.search_text, ' ') AS t
       WHERE m.status = 'active' AND t <> '' AND ({where})
       GROUP BY m.agent_id, m.user_id, t, m.id
       ORDER BY m.agent_id, m.user_id, t, m.id"""


def sqlite_postings_rebuild(lengths: bool = True, where: str = "1") -> str:
    """pg_postings_rebuild's statement for SQLite."""
    columns, length = _postings(lengths, "m")
    return f"""INSERT INTO memory_terms ({columns})
       SELECT m.agent_id, m.user_id, j.value, m.id, count(*){length}
       FROM memories AS m,
            json_each('["' || replace(m.search_text, ' ', '","') || '"]') AS j
       WHERE m.status = 'active' AND j.value <> '' AND ({where}) GROUP BY m.id, j.value"""


def _sqlite_rebuild(lengths: bool, trigrams: bool) -> list[str]:
    postings = ["DELETE FROM memory_terms", sqlite_postings_rebuild(lengths)]
    return postings + (SQLITE_TRIGRAM_FILL if trigrams else [])


@contextmanager
def postings_deferred(bind: Connection) -> Iterator[None]:
    """For a bulk load of memories in the current schema, inside the caller's
    transaction (an error rolls the trigger change back with the rows): the memories
    inserted inside get their postings at the end, from one statement, not from the
    insert trigger row by row."""
    postgres = bind.dialect.name == "postgresql"
    loaded_after = bind.execute(text("SELECT coalesce(max(id), 0) FROM memories")).scalar_one()
    if postgres:
        bind.execute(text("ALTER TABLE memories DISABLE TRIGGER memories_terms_insert"))
    else:
        bind.execute(text("DROP TRIGGER memories_search_insert"))
    yield
    new_rows, params = "m.id > :loaded_after", {"loaded_after": loaded_after}
    if postgres:
        bind.execute(text("ALTER TABLE memories ENABLE TRIGGER memories_terms_insert"))
        bind.execute(text(pg_postings_rebuild(where=new_rows)), params)
    else:
        bind.execute(text(sqlite_postings_rebuild(where=new_rows)), params)
        _run(bind, _sqlite_install(True, trigrams=False))  # the triggers, as they were


SQLITE_TRIGRAM_FILL = [
    "DELETE FROM memories_trgm",
    """INSERT INTO memories_trgm (rowid, body)
       SELECT id, name || ' ' || content FROM memories WHERE status = 'active'""",
]


def _run(bind: Connection, statements: list[str]) -> None:
    for statement in statements:
        bind.execute(text(statement))


def reindex_terms(bind: Connection, chunk: int = 5000) -> int:
    """Re-derive every memory's search terms and length with today's term rules (a
    migration runs it after the rules change). Only rows whose terms changed are
    written, so the triggers rebuild only their postings. Returns how many changed."""
    last, changed = 0, 0
    while True:
        rows = bind.execute(
            text(
                "SELECT id, name, content, search_text, search_length FROM memories "
                "WHERE id > :last ORDER BY id LIMIT :n"
            ),
            {"last": last, "n": chunk},
        ).all()
        if not rows:
            return changed
        updates = []
        for row in rows:
            terms = memory_search_text(row.name, row.content)
            length = len(terms.split())
            if (terms, length) != (row.search_text, row.search_length):
                updates.append({"id": row.id, "t": terms, "n": length})
        if updates:
            bind.execute(
                text("UPDATE memories SET search_text = :t, search_length = :n WHERE id = :id"),
                updates,
            )
        changed += len(updates)
        last = rows[-1].id


def install(bind: Connection, lengths: bool = True, trigrams: bool = True) -> None:
    """Create (or re-create) the triggers and trigram structures, then fill them.
    `lengths`: whether the schema's postings carry search_length (migration 0012);
    `trigrams`: whether it has the trigram index of large scopes (before 0015)."""
    if bind.dialect.name == "postgresql":
        rebuild = ["DELETE FROM memory_terms", pg_postings_rebuild(lengths)]
        _run(bind, [*_pg_install(lengths, trigrams), *rebuild])
    else:
        _run(bind, [*_sqlite_install(lengths, trigrams), *_sqlite_rebuild(lengths, trigrams)])


def set_trigram_index(bind: Connection, present: bool) -> None:
    """Add or drop the trigram index of large scopes (migration 0015), keeping the
    postings as they are."""
    if bind.dialect.name == "postgresql":
        drop = ["DROP INDEX IF EXISTS ix_memories_scope_trgm"]
        _run(bind, PG_TRIGRAM_INSTALL if present else drop)
    elif present:
        _run(bind, [*_sqlite_install(True, trigrams=True), *SQLITE_TRIGRAM_FILL])
    else:
        _run(bind, [*_sqlite_install(True, trigrams=False), "DROP TABLE IF EXISTS memories_trgm"])


def uninstall(bind: Connection) -> None:
    _run(bind, PG_DROP if bind.dialect.name == "postgresql" else SQLITE_DROP)
