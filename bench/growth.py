"""Each table's growth per user-day, for bench/lifecycle.py (and docs/scaling.md).

A check reads every table: its rows, the chatting users' share of them (a table with
scope columns counts the rows outside the probe's scope, which is recalled far more
often than a user; any other table counts whole) and, on PostgreSQL, its size with
indexes and TOAST (`pg_total_relation_size`), of which the users' rows are given their
share. Two windows divide what the users' rows and bytes gained by the user-days they
lived through: from day 0 to the last check before retention starts removing rows
(the tables filling), and the last check interval (the plateau, where retention
removes a day's rows for every day's new ones).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, func, not_, select, text

from memoryd.models.base import ScopeLike
from memoryd.models.db import session_scope
from memoryd.models.tables import Base
from memoryd.settings import Settings


@dataclass
class Check:
    total: dict[str, int]  # every row of each table
    users: dict[str, int]  # the chatting users' rows
    size: dict[str, int]  # bytes (PostgreSQL; empty on SQLite)

    def users_bytes(self, table: str) -> float:
        """The users' share of the table's bytes, pro rata of their rows."""
        if table not in self.size or not self.total[table]:
            return 0.0
        return self.size[table] * self.users[table] / self.total[table]


def read(settings: Settings, probe: ScopeLike) -> Check:
    check = Check({}, {}, {})
    postgres = settings.storage.resolved_database_url.startswith("postgresql")
    with session_scope(settings.storage, readonly=True) as session:
        for table in Base.metadata.sorted_tables:
            count = select(func.count()).select_from(table)
            check.total[table.name] = int(session.scalar(count) or 0)
            if {"agent_id", "user_id"} <= set(table.c.keys()):
                mine = and_(table.c.agent_id == probe.agent_id, table.c.user_id == probe.user_id)
                count = count.where(not_(mine))
            check.users[table.name] = int(session.scalar(count) or 0)
            if postgres:
                size = text("SELECT pg_total_relation_size(CAST(:t AS regclass))")
                check.size[table.name] = int(session.scalar(size, {"t": table.name}) or 0)
    return check


@dataclass
class Window:
    first: int
    last: int
    user_days: int

    def rows(self, checks: dict[int, Check], table: str) -> float:
        gained = checks[self.last].users[table] - checks[self.first].users[table]
        return gained / self.user_days

    def bytes(self, checks: dict[int, Check], table: str) -> float:
        before, after = checks[self.first], checks[self.last]
        return (after.users_bytes(table) - before.users_bytes(table)) / self.user_days

    @property
    def label(self) -> str:
        return f"days {self.first}-{self.last}"


def windows(checks: dict[int, Check], per_day: int, retention_days: float) -> dict[str, Window]:
    """Filling: day 0 to the last check before retention removes anything; plateau: the
    last check interval, once past retention. Either is missing when no check fits it."""
    days = sorted(checks)
    found = {}
    filling = [d for d in days[1:] if d <= retention_days]
    if filling:
        found["filling"] = Window(days[0], filling[-1], (filling[-1] - days[0]) * per_day)
    if len(days) >= 2 and days[-2] > retention_days:
        found["plateau"] = Window(days[-2], days[-1], (days[-1] - days[-2]) * per_day)
    return found


def report(
    kind: str, checks: dict[int, Check], per_day: int, retention_days: float
) -> dict[str, float | None]:
    """Print rows and bytes per user-day of every table in each window; return the
    summed bytes per user-day of each window for the bench's JSON line (PostgreSQL)."""
    found = windows(checks, per_day, retention_days)
    last = checks[max(checks)]
    print(f"\n{kind}: growth per user-day ({per_day} users chat each day)")
    head = "".join(f"{'rows ' + w.label:>18}{'bytes':>10}" for w in found.values())
    print(f"{'table':<22}{head}{'rows now':>12}{'bytes now':>14}")
    for table in sorted(last.total):
        cells = "".join(
            f"{w.rows(checks, table):>18.3f}{w.bytes(checks, table):>10.0f}" for w in found.values()
        )
        print(f"{table:<22}{cells}{last.total[table]:>12}{last.size.get(table, 0):>14}")
    if not last.size:
        return {}
    return {
        f"{kind}_bytes_per_user_day_{name}": sum(w.bytes(checks, t) for t in last.total)
        for name, w in found.items()
    }
