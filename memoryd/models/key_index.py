"""The subject keys each scope uses, at the cost of what changed.

Which keys a scope holds, with how many active memories each and when one was last
written, is what an extraction prompt offers the model to reuse (extraction/prepare.py).
Reading it from the memories cost a pass over the scope, so only the newest memories
were read and an old key went unoffered. Instead triggers on `memories` append a row
for each memory arriving at or leaving a key (`subject_keys`), and the maintenance
cycle folds a scope's changes of one key into one row. Rows are only ever inserted by
writers, so writers never wait on a shared counter row; a fold reads the changes since
the last fold and the folded rows of their keys only, so it costs what changed.

As with the tallies (models/tallies.py), every path that writes memories (the store,
imports, erasure, retention, migrations, SQL by hand) keeps the index right. A migration
that rebuilds the memories table on SQLite drops its triggers: it must call `install`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, insert, select, text, tuple_
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from memoryd.models.keys import Scope
from memoryd.models.tables import KeyAlias, SubjectKey
from memoryd.models.triggers import install_triggers, refill, uninstall_triggers

_COLUMNS = "agent_id, user_id, name_key, active, held, used_at"


def _change(row: str, sign: str, active: str) -> str:
    """The values of one change: `row` (NEW or OLD) arriving (+) or leaving (-)."""
    return (
        f"{row}.agent_id, {row}.user_id, {row}.name_key, "
        f"{sign}({active}), {sign}1, {row}.updated_at"
    )


_PG_ACTIVE = "CASE WHEN {row}.status = 'active' THEN 1 ELSE 0 END"
_PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION memoryd_index_keys() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.name_key <> '' THEN
        INSERT INTO subject_keys ({_COLUMNS})
        VALUES ({_change("OLD", "-", _PG_ACTIVE.format(row="OLD"))});
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.name_key <> '' THEN
        INSERT INTO subject_keys ({_COLUMNS})
        VALUES ({_change("NEW", "", _PG_ACTIVE.format(row="NEW"))});
    END IF;
    RETURN NULL;
END $$
"""
_PG_INSTALL = [
    _PG_FUNCTION,
    "DROP TRIGGER IF EXISTS memories_keys_insert_delete ON memories",
    "DROP TRIGGER IF EXISTS memories_keys_update ON memories",
    """CREATE TRIGGER memories_keys_insert_delete AFTER INSERT OR DELETE ON memories
       FOR EACH ROW EXECUTE FUNCTION memoryd_index_keys()""",
    """CREATE TRIGGER memories_keys_update AFTER UPDATE OF status, name_key ON memories
       FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
                          OR OLD.name_key IS DISTINCT FROM NEW.name_key)
       EXECUTE FUNCTION memoryd_index_keys()""",
]
_SQLITE_ACTIVE = "{row}.status = 'active'"
_SQLITE_ARRIVES = (
    f"INSERT INTO subject_keys ({_COLUMNS}) "
    f"SELECT {_change('NEW', '', _SQLITE_ACTIVE.format(row='NEW'))} WHERE NEW.name_key <> '';"
)
_SQLITE_LEAVES = (
    f"INSERT INTO subject_keys ({_COLUMNS}) "
    f"SELECT {_change('OLD', '-', _SQLITE_ACTIVE.format(row='OLD'))} WHERE OLD.name_key <> '';"
)
_SQLITE_INSTALL = [
    "DROP TRIGGER IF EXISTS memories_keys_insert",
    "DROP TRIGGER IF EXISTS memories_keys_delete",
    "DROP TRIGGER IF EXISTS memories_keys_update",
    f"CREATE TRIGGER memories_keys_insert AFTER INSERT ON memories BEGIN {_SQLITE_ARRIVES} END",
    f"CREATE TRIGGER memories_keys_delete AFTER DELETE ON memories BEGIN {_SQLITE_LEAVES} END",
    f"""CREATE TRIGGER memories_keys_update AFTER UPDATE OF status, name_key ON memories
        WHEN OLD.status IS NOT NEW.status OR OLD.name_key IS NOT NEW.name_key
        BEGIN {_SQLITE_LEAVES} {_SQLITE_ARRIVES} END""",
]
_COUNT_ALL = (
    f"INSERT INTO subject_keys ({_COLUMNS}, folded) "
    "SELECT agent_id, user_id, name_key, "
    "sum(CASE WHEN status = 'active' THEN 1 ELSE 0 END), count(*), max(updated_at), {true} "
    "FROM memories WHERE name_key <> '' GROUP BY agent_id, user_id, name_key"
)


def install(bind: Connection) -> None:
    """(Re-)create the triggers and start the index from the memories stored now."""
    install_triggers(bind, _PG_INSTALL, _SQLITE_INSTALL, "subject_keys", _count_all(bind))


def recount(bind: Connection) -> None:
    """Start the index again from the memories stored now: after a bulk load, or a
    TRUNCATE of memories (which fires no row trigger)."""
    refill(bind, "subject_keys", _count_all(bind))


def _count_all(bind: Connection) -> str:
    return _COUNT_ALL.format(true="true" if bind.dialect.name == "postgresql" else "1")


def uninstall(bind: Connection) -> None:
    uninstall_triggers(bind, "keys", "memoryd_index_keys")


@dataclass(frozen=True)
class KeyUse:
    """One subject key of a scope: its active memories, and when one was last written."""

    key: str
    active: int
    used_at: datetime


def keys_in_use(session: Session, scope: Scope) -> list[KeyUse]:
    """The scope's keys with active memories, most used first, then most recent: the
    folded rows and the changes since, from the index (never from the memories)."""
    active, used = func.sum(SubjectKey.active), func.max(SubjectKey.used_at)
    rows = session.execute(
        select(SubjectKey.name_key, active, used)
        .where(SubjectKey.of(scope))
        .group_by(SubjectKey.name_key)
        .having(active > 0)
    )
    uses = [KeyUse(key, int(n), at) for key, n, at in rows]
    uses.sort(key=lambda u: (-u.active, -u.used_at.timestamp(), u.key))
    return uses


def aliases(session: Session, scope: Scope) -> dict[str, str]:
    """The scope's learnt aliases: another name of a key -> the key facts land on."""
    rows = session.execute(select(KeyAlias.alias, KeyAlias.name_key).where(KeyAlias.of(scope)))
    return {alias: key for alias, key in rows}


def add_alias(session: Session, scope: Scope, alias: str, key: str, now: datetime) -> bool:
    """Record that `alias` names `key` in this scope (the caller holds the scope's lock):
    False when it was known, or would make a key an alias of itself or of an alias."""
    if not alias or not key or alias == key:
        return False
    known = aliases(session, scope)
    if alias in known or key in known:
        return False
    session.add(
        KeyAlias(
            agent_id=scope.agent_id,
            user_id=scope.user_id,
            alias=alias,
            name_key=key,
            created_at=now,
        )
    )
    return True


Group = tuple[str, str, str]  # agent, user, key
# The partial index's own predicate, as written: SQLAlchemy writes `folded IS 0` on
# SQLite, which SQLite does not match to the index, and each fold walked the table.
UNFOLDED = text("NOT subject_keys.folded")


def fold(session: Session, limit: int) -> int:
    """Fold up to `limit` of the oldest changes, with the folded rows of their keys, into
    one row per scope and key (none for a key no memory holds any more: its name leaves
    the store with its last memory). Returns the changes read."""
    oldest = (
        select(SubjectKey.id).where(UNFOLDED).order_by(SubjectKey.id).limit(limit).scalar_subquery()
    )
    changes = _take(session, SubjectKey.id.in_(oldest))
    if not changes:
        return 0
    groups = sorted({row[:3] for row in changes})
    folded = _take(
        session,
        SubjectKey.folded.is_(True),
        tuple_(SubjectKey.agent_id, SubjectKey.user_id, SubjectKey.name_key).in_(groups),
    )
    sums: defaultdict[Group, list[int]] = defaultdict(lambda: [0, 0])
    used: dict[Group, datetime] = {}
    for agent, user, key, active, held, at in [*changes, *folded]:
        sums[(agent, user, key)][0] += active
        sums[(agent, user, key)][1] += held
        used[(agent, user, key)] = max(used.get((agent, user, key), at), at)
    rows = [
        {
            "agent_id": a,
            "user_id": u,
            "name_key": k,
            "active": n,
            "held": h,
            "used_at": used[(a, u, k)],
            "folded": True,
        }
        for (a, u, k), (n, h) in sums.items()
        if h or n
    ]
    if rows:
        session.execute(insert(SubjectKey), rows)
    gone = [group for group, (n, h) in sums.items() if not (h or n)]
    if gone:  # an alias of a name no memory holds would keep that name in the store
        scope_alias = tuple_(KeyAlias.agent_id, KeyAlias.user_id, KeyAlias.alias)
        scope_key = tuple_(KeyAlias.agent_id, KeyAlias.user_id, KeyAlias.name_key)
        session.execute(delete(KeyAlias).where(scope_alias.in_(gone) | scope_key.in_(gone)))
    return len(changes)


def _take(session: Session, *where: object) -> list[tuple[str, str, str, int, int, datetime]]:
    """Delete the rows matching `where`, returning what they held."""
    returned = session.execute(
        delete(SubjectKey)
        .where(*where)  # type: ignore[arg-type]
        .returning(
            SubjectKey.agent_id,
            SubjectKey.user_id,
            SubjectKey.name_key,
            SubjectKey.active,
            SubjectKey.held,
            SubjectKey.used_at,
        )
    )
    return [tuple(r) for r in returned]  # type: ignore[misc]
