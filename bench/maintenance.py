"""One maintenance cycle on stores of 100,000 and 1,000,000 memories (10,000 users).

Each store holds the same 10,000 rows due to change state (a third each to promote,
expire and archive); everything else is not due. The cycle should cost what changes,
not what is stored. Baseline, same run: a naive per-row ORM loop (load every active
memory, compute its decayed weight, update it) over the 100,000-row store.

    .venv/bin/python bench/maintenance.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from sqlalchemy import func, select, text

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the repository, not bench/
from bench.common import emit, print_table, scratch_database
from memoryd.maintenance.cycle import run_cycle
from memoryd.memories.weights import effective_weight
from memoryd.models import tallies
from memoryd.models.db import get_engine, session_scope, utcnow
from memoryd.models.tables import (
    Actor,
    EventKind,
    Memory,
    MemoryEvent,
    MemoryStatus,
    Tier,
)
from memoryd.settings import Settings

USERS = 10_000
DUE = 10_000

# Rows 0..DUE-1 are due: i % 3 == 0 promote (retrieved 3 times), 1 expire, 2 archive (their
# weight decayed under archive_threshold). The rest are long-tier
# memories far from archiving, and short-tier ones used less than promote_access_count
# times whose TTL has not run out.
LOAD = text("""
INSERT INTO memories (agent_id, user_id, category, tier, status, name, content, tags,
    confidence, weight, weight_at, archive_due_at, evidence_count, access_count,
    promotable_at, expires_at, content_hash, source_turn_ids, created_at, updated_at)
SELECT 'bench', 'u' || (i % :users), 'user',
    CASE WHEN i < :due AND i % 3 IN (0, 1) THEN 'short'
         WHEN i >= :due AND i % 10 < 3 THEN 'short' ELSE 'long' END,
    'active', 'fact ' || i, 'The user mentioned fact number ' || i, '[]', 0.9,
    CASE WHEN i < :due AND i % 3 = 2 THEN 0.01 ELSE 1.0 END,
    :now - interval '1 day',
    CASE WHEN i < :due AND i % 3 = 2 THEN :now - interval '1 hour'
         WHEN i < :due OR i % 10 < 3 THEN NULL ELSE :now + interval '200 days' END,
    1,
    CASE WHEN i < :due AND i % 3 = 0 THEN 3 ELSE i % 3 END,
    CASE WHEN i < :due AND i % 3 = 0 THEN :now - interval '1 hour' END,
    CASE WHEN i < :due AND i % 3 = 1 THEN :now - interval '1 hour'
         WHEN i < :due AND i % 3 = 0 THEN :now + interval '5 days'
         WHEN i >= :due AND i % 10 < 3 THEN :now + interval '5 days' ELSE NULL END,
    md5(i::text), '[]', :now - interval '1 day', :now - interval '1 day'
FROM generate_series(0, :rows - 1) AS i
""")


def load(url: str, rows: int) -> None:
    with get_engine(Settings(database_url=url).storage).begin() as conn:
        conn.execute(text("TRUNCATE memories, memory_events RESTART IDENTITY CASCADE"))
        conn.execute(LOAD, {"users": USERS, "due": DUE, "rows": rows, "now": utcnow()})
        # The load's own tally rows would be folded by the first timed cycle.
        tallies.recount(conn)
        conn.execute(text("ANALYZE memories"))


def timed_cycle(settings: Settings) -> tuple[float, int]:
    start = time.perf_counter()
    counts = run_cycle(settings)
    return time.perf_counter() - start, counts.promoted + counts.expired + counts.archived


def naive_cycle(settings: Settings) -> tuple[float, int]:
    """What a straightforward implementation does: visit every active memory."""
    start = time.perf_counter()
    changed = 0
    now = utcnow()
    with session_scope(settings.storage) as session:
        for memory in session.scalars(select(Memory).where(Memory.status == MemoryStatus.ACTIVE)):
            kind = None
            if (
                memory.tier == Tier.SHORT
                and memory.access_count >= settings.memories.promote_access_count
            ):
                memory.tier, memory.expires_at, kind = Tier.LONG, None, EventKind.PROMOTED
            elif memory.tier == Tier.SHORT and memory.expires_at and memory.expires_at <= now:
                memory.status, kind = MemoryStatus.EXPIRED, EventKind.EXPIRED
            elif (
                memory.tier == Tier.LONG
                and effective_weight(memory, now, settings.memories)
                < settings.memories.archive_threshold
            ) or (
                memory.tier == Tier.LONG
                and memory.archive_due_at is not None
                and (memory.archive_due_at <= now)
            ):
                memory.status, kind = MemoryStatus.ARCHIVED, EventKind.ARCHIVED
            if kind is not None:
                changed += 1
                session.add(
                    MemoryEvent(
                        memory_id=memory.id,
                        agent_id=memory.agent_id,
                        user_id=memory.user_id,
                        kind=kind,
                        actor=Actor.MAINTENANCE,
                        created_at=now,
                    )
                )
            memory.updated_at = now  # the naive loop rewrites every row it decays
    return time.perf_counter() - start, changed


def main() -> None:
    with scratch_database("memoryd_bench_maint") as url:
        settings = Settings(database_url=url)
        load(url, 100_000)
        cycle_100k, changed_100k = timed_cycle(settings)
        load(url, 1_000_000)
        cycle_1m, changed_1m = timed_cycle(settings)
        with session_scope(settings.storage) as session:
            events = session.scalar(select(func.count()).select_from(MemoryEvent))
        load(url, 100_000)
        naive_100k, naive_changed = naive_cycle(settings)
    assert changed_100k == changed_1m == naive_changed == DUE, (
        changed_100k,
        changed_1m,
        naive_changed,
    )
    assert events == DUE
    print_table(
        f"maintenance cycle on PostgreSQL ({DUE} rows due, {USERS} users)",
        [
            ("baseline: naive per-row ORM loop, 100k", naive_100k, "s", 1.0),
            ("cycle, 100k store", cycle_100k, "s", cycle_100k / naive_100k),
            ("cycle, 1M store (target <= 3 s)", cycle_1m, "s", cycle_1m / naive_100k),
            ("1M cycle / 100k cycle (target <= 2x)", cycle_1m / cycle_100k, "ratio", None),
            ("rows changed per cycle", float(changed_1m), "rows", None),
        ],
    )
    emit(
        {
            "cycle_s_100k": cycle_100k,
            "cycle_s_1m": cycle_1m,
            "rows_changed": changed_1m,
            "naive_100k_s": naive_100k,
        }
    )


if __name__ == "__main__":
    main()
