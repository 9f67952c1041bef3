"""Whole-store memory figures that cost what changed, not what is stored.

How many memories there are of each status, tier and category, and their summed
confidence, is what the page's health panel, `/v1/stats` and `memoryd stats` show for
the whole store. Grouping every memory on each view cost a pass over the table; instead
triggers on `memories` append a tally row for each change (+1 and the confidence for a
memory arriving at a key, -1 and its confidence for one leaving it), and the
maintenance cycle folds them into one row per key. A reader sums the folded rows and
the changes since the last fold. Tallies are written by the database itself, so every
path that writes memories (the store, imports, erasure, retention, migrations, SQL by
hand) keeps them right, and they only ever insert: writers of different scopes never
wait on a shared counter row.

A migration that rebuilds the memories table on SQLite drops its triggers: it must call
`install` again (as it calls search_index.install).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from sqlalchemy import delete, func, insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from memoryd.models.tables import MemoryTally
from memoryd.models.triggers import install_triggers, refill, uninstall_triggers

_COLUMNS = "status, tier, category, memories, confidence"

_PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION memoryd_tally_memories() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        INSERT INTO memory_tallies ({_COLUMNS})
        VALUES (OLD.status, OLD.tier, OLD.category, -1, -OLD.confidence);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO memory_tallies ({_COLUMNS})
        VALUES (NEW.status, NEW.tier, NEW.category, 1, NEW.confidence);
    END IF;
    RETURN NULL;
END $$
"""
# A change of anything else (weights, access counts, search text) writes no tally.
_CHANGED = {
    "postgresql": " OR ".join(
        f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in ("status", "tier", "category", "confidence")
    ),
    "sqlite": " OR ".join(
        f"OLD.{c} IS NOT NEW.{c}" for c in ("status", "tier", "category", "confidence")
    ),
}
_PG_INSTALL = [
    _PG_FUNCTION,
    "DROP TRIGGER IF EXISTS memories_tally_insert_delete ON memories",
    "DROP TRIGGER IF EXISTS memories_tally_update ON memories",
    """CREATE TRIGGER memories_tally_insert_delete AFTER INSERT OR DELETE ON memories
       FOR EACH ROW EXECUTE FUNCTION memoryd_tally_memories()""",
    f"""CREATE TRIGGER memories_tally_update
       AFTER UPDATE OF status, tier, category, confidence ON memories
       FOR EACH ROW WHEN ({_CHANGED["postgresql"]})
       EXECUTE FUNCTION memoryd_tally_memories()""",
]
_SQLITE_ARRIVES = (
    f"INSERT INTO memory_tallies ({_COLUMNS}) "
    "VALUES (NEW.status, NEW.tier, NEW.category, 1, NEW.confidence);"
)
_SQLITE_LEAVES = (
    f"INSERT INTO memory_tallies ({_COLUMNS}) "
    "VALUES (OLD.status, OLD.tier, OLD.category, -1, -OLD.confidence);"
)
_SQLITE_INSTALL = [
    "DROP TRIGGER IF EXISTS memories_tally_insert",
    "DROP TRIGGER IF EXISTS memories_tally_delete",
    "DROP TRIGGER IF EXISTS memories_tally_update",
    f"CREATE TRIGGER memories_tally_insert AFTER INSERT ON memories BEGIN {_SQLITE_ARRIVES} END",
    f"CREATE TRIGGER memories_tally_delete AFTER DELETE ON memories BEGIN {_SQLITE_LEAVES} END",
    f"""CREATE TRIGGER memories_tally_update
        AFTER UPDATE OF status, tier, category, confidence ON memories
        WHEN {_CHANGED["sqlite"]}
        BEGIN {_SQLITE_LEAVES} {_SQLITE_ARRIVES} END""",
]
_COUNT_ALL = (
    f"INSERT INTO memory_tallies ({_COLUMNS}) "
    "SELECT status, tier, category, count(*), coalesce(sum(confidence), 0) FROM memories "
    "GROUP BY status, tier, category"
)


def install(bind: Connection) -> None:
    """(Re-)create the triggers and start the tallies from the memories stored now."""
    install_triggers(bind, _PG_INSTALL, _SQLITE_INSTALL, "memory_tallies", _COUNT_ALL)


def recount(bind: Connection) -> None:
    """Start the tallies again from the memories stored now: after a bulk load, or a
    TRUNCATE of memories (which fires no row trigger)."""
    refill(bind, "memory_tallies", _COUNT_ALL)


def uninstall(bind: Connection) -> None:
    uninstall_triggers(bind, "tally", "memoryd_tally_memories")


@dataclass(frozen=True)
class Tally:
    status: str
    tier: str
    category: str
    memories: int
    confidence: float


def memory_tallies(session: Session) -> list[Tally]:
    """The whole store's memories per status, tier and category, with their summed
    confidence: the folded rows plus the changes since (keys with no memory left out)."""
    key = (MemoryTally.status, MemoryTally.tier, MemoryTally.category)
    rows = session.execute(
        select(*key, func.sum(MemoryTally.memories), func.sum(MemoryTally.confidence))
        .group_by(*key)
        .having(func.sum(MemoryTally.memories) != 0)
    )
    return [Tally(s, t, c, int(n), float(conf or 0.0)) for s, t, c, n, conf in rows]


def fold(session: Session, limit: int) -> int:
    """Replace up to `limit` of the oldest tally rows by their sums, one row per key (no
    row for a key with nothing left). Rows a concurrent writer adds meanwhile are
    left for the next fold; the rows read are the rows deleted. Returns the rows read.
    There are at most statuses x tiers x categories keys (about 100), so a chunk of the
    cycle's thousands always folds most of what it reads."""
    oldest = select(MemoryTally.id).order_by(MemoryTally.id).limit(limit).scalar_subquery()
    removed = session.execute(
        delete(MemoryTally)
        .where(MemoryTally.id.in_(oldest))
        .returning(
            MemoryTally.status,
            MemoryTally.tier,
            MemoryTally.category,
            MemoryTally.memories,
            MemoryTally.confidence,
        )
    ).all()
    memories: Counter[tuple[str, str, str]] = Counter()
    confidence: defaultdict[tuple[str, str, str], float] = defaultdict(float)
    for status, tier, category, n, conf in removed:
        memories[(status, tier, category)] += n
        confidence[(status, tier, category)] += conf
    # A chunk may hold a memory's old confidence and not yet its new one: a key is
    # dropped only when nothing of it is left.
    folded = [
        {"status": s, "tier": t, "category": c, "memories": n, "confidence": confidence[s, t, c]}
        for (s, t, c), n in memories.items()
        if n or abs(confidence[s, t, c]) > 1e-9
    ]
    if folded:
        session.execute(insert(MemoryTally), folded)
    return len(removed)
