"""Months of use with retention on: do the tables plateau, and do maintenance and recall
cost on the last day what they cost on day 30?

Each simulated day (the clock moved forward with freezegun; the database's own clock,
which leases use, is left alone, and PostgreSQL's batch stamps are moved to the day) a
share of the users chats: one session of real conversation text (RealMem's session
memories, said as "please remember that …", bench/data/NOTICE), extracted at once by
the offline extractor; each of them recalls, one in twenty deletes a memory, and the
day ends with beat's maintenance cycle. Row counts of every table are read every 30
days (`--check-every`). Retention keeps `--retention-days` (14) of turns, usage,
batches and deleted memories, so the tables it governs reach their plateau before day
30, the baseline (with the defaults, 90 days, they reach it on day 90). Memories age
faster too: `--half-life-days` (4; the default is 90) archives a memory nobody used for
about 13 days, and retention purges it 14 days later, so users' memories reach within
the bench's months the steady state a store with the defaults reaches in about two years
(an unused memory archived after 299 days, purged 365 days later).
Each check also reads every table's size, and the bench prints each table's rows and
bytes per user-day (bench/growth.py) while the tables fill and at the plateau: checks
every 10 days (`--check-every 10`) give both windows within 30 days.

Two recall figures: every chatting user's recall, whose cost follows that user's
memories (they grow all along: each session adds new facts), and a probe user with a
fixed set of memories recalled each day, whose cost shows what the store's age and size
alone do to a recall.

Then a user with 5,000 memories is erased while a thread extracts other users'
sessions: how long the erasure takes, and those extractions' median and slowest
meanwhile against their median before it (the baseline), beside the slowest before it.

    .venv/bin/python bench/lifecycle.py                                  # 1,000 users, 180 days
    .venv/bin/python bench/lifecycle.py --users 200 --days 60 --databases sqlite
    .venv/bin/python bench/lifecycle.py --days 60 --check-every 10 --databases postgres
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the repository, not bench/

from freezegun import freeze_time
from sqlalchemy import update

from bench import growth
from bench.common import Analyzer, bench_database, emit, percentile, print_table
from memoryd.client import MemoryClient
from memoryd.extraction.batch import extract_session
from memoryd.maintenance.cycle import run_cycle
from memoryd.memories.proposals import Fact
from memoryd.memories.store import create_memory
from memoryd.models.db import dispose_engines, session_scope, utcnow
from memoryd.models.keys import Scope, SessionKey
from memoryd.models.tables import Actor, ExtractionBatch
from memoryd.settings import FIELDS as SETTING_FIELDS
from memoryd.settings import Settings

DATA = Path(__file__).resolve().parent / "data"
AGENT = "bench"
CHECK_EVERY = 30  # days between checks of every table, by default; the baseline's day
TURNS = 3  # the user's, each answered: six turns a session
WEEK = 7
PROBE = Scope(AGENT, "probe")
PROBE_MEMORIES = 25
# A week's p95 of ten a day was its 4th slowest of 70: one noisy moment moved it 30%.
PROBE_RECALLS = 50


def texts() -> list[str]:
    with gzip.open(DATA / "realmem.json.gz", "rt", encoding="utf-8") as f:
        users = json.load(f)["users"]
    found = [m for u in users for s in u["sessions"] for m in s["memories"]]
    return [t.partition("】")[2].strip() or t for t in found]


@dataclass
class Run:
    checks: dict[int, growth.Check] = field(default_factory=dict)
    cycle_ms: dict[int, float] = field(default_factory=dict)
    recall_ms: dict[int, list[float]] = field(default_factory=dict)
    probe_ms: dict[int, list[float]] = field(default_factory=dict)
    held: dict[int, list[int]] = field(default_factory=dict)  # the user's active memories
    hits: dict[int, list[int]] = field(default_factory=dict)  # what each recall returned
    erase_s: float = 0.0
    erased_rows: int = 0
    others_before_ms: list[float] = field(default_factory=list)
    others_during_ms: list[float] = field(default_factory=list)


def say(client: MemoryClient, user: str, session: str, lines: list[str]) -> SessionKey:
    turns = []
    for i, line in enumerate(lines):
        for role, content in (("user", f"Please remember that {line}"), ("assistant", "Noted.")):
            turns.append(
                {
                    "agent_id": AGENT,
                    "user_id": user,
                    "session_id": session,
                    "role": role,
                    "content": content,
                    "turn_key": f"{session}-{i}-{role}",
                }
            )
    client.enqueue_turns(turns)
    client.end_session(AGENT, user, session)
    return SessionKey(AGENT, user, session)


def one_day(client: MemoryClient, day: int, users: list[str], pool: list[str], run: Run) -> None:
    rng = random.Random(day)
    for user in users:
        lines = [pool[rng.randrange(len(pool))] for _ in range(TURNS)]
        key = say(client, user, f"d{day}", lines)
        extract_session(client.settings, key)
        started = time.perf_counter()
        hits = client.recall(lines[0][:200], AGENT, user, k=10, session_id=key.session_id)
        run.recall_ms.setdefault(day, []).append((time.perf_counter() - started) * 1000)
        run.hits.setdefault(day, []).append(len(hits))
        run.held.setdefault(day, []).append(client.health(AGENT, user).active)
        if rng.random() < 0.05 and (mine := client.list(AGENT, user, limit=1)):
            client.forget(AGENT, user, mine[0].id)
    for fact in rng.choices(probe_facts(pool), k=PROBE_RECALLS):
        started = time.perf_counter()
        client.recall(fact[:200], PROBE.agent_id, PROBE.user_id, k=10)
        run.probe_ms.setdefault(day, []).append((time.perf_counter() - started) * 1000)
    restamp_batches(client.settings)
    started = time.perf_counter()
    run_cycle(client.settings)
    run.cycle_ms[day] = (time.perf_counter() - started) * 1000


def restamp_batches(settings: Settings) -> None:
    """PostgreSQL stamps batches with its own clock (leases' clock), which freezegun
    cannot move: the day's batches get the simulated day's time, as they would have had
    on that day, so that batch retention sees their age."""
    if not settings.storage.resolved_database_url.startswith("postgresql"):
        return
    now = utcnow()
    with session_scope(settings.storage) as session:
        session.execute(
            update(ExtractionBatch)
            .where(ExtractionBatch.started_at > now)
            .values(started_at=now, finished_at=now)
        )


def probe_facts(pool: list[str]) -> list[str]:
    return pool[-PROBE_MEMORIES:]


def add_probe(settings: Settings, pool: list[str]) -> None:
    with session_scope(settings.storage) as session:
        for text in probe_facts(pool):
            fact = Fact(content=text, confidence=0.95)
            create_memory(session, settings, PROBE, fact, utcnow(), actor=Actor.API)


def chatting(users: int, share: float) -> int:
    """How many users chat each day."""
    return max(1, int(users * share))


def simulate(
    settings: Settings, users: int, days: int, share: float, run: Run, check_every: int
) -> None:
    client = MemoryClient(settings, dispatch=False)
    pool = texts()
    everyone = [f"user-{i}" for i in range(users)]
    start = datetime.now().astimezone() - timedelta(days=days + 1)
    with freeze_time(start, tick=True):
        add_probe(settings, pool)
        run.checks[0] = growth.read(settings, PROBE)
    # PostgreSQL: the statistics autovacuum would keep (this machine's server may run
    # without it): otherwise the planner plans for the empty tables of day one.
    postgres = settings.storage.resolved_database_url.startswith("postgresql")
    analyzer = Analyzer(settings.storage.resolved_database_url) if postgres else None
    for day in range(1, days + 1):
        active = random.Random(-day).sample(everyone, chatting(users, share))
        with freeze_time(start + timedelta(days=day), tick=True):
            one_day(client, day, active, pool, run)
            if day % check_every == 0 or day == days:
                run.checks[day] = growth.read(settings, PROBE)
        if analyzer is not None:
            analyzer.wrote(len(active) * TURNS * 3)  # turns said and memories learnt
        if day % 10 == 0:
            counts = run.checks[day].total if day in run.checks else ""
            print(f"  day {day}: {counts}", file=sys.stderr, flush=True)
    if analyzer is not None:
        analyzer.close()


def erase_under_load(settings: Settings, memories: int, run: Run) -> None:
    """A user with `memories` memories, erased while another thread extracts."""
    client = MemoryClient(settings, dispatch=False)
    scope = Scope(AGENT, "heavy")
    pool = texts()
    for first in range(0, memories, 500):
        with session_scope(settings.storage) as session:
            for i in range(first, min(first + 500, memories)):
                fact = Fact(content=f"{pool[i % len(pool)]} (note {i})", confidence=0.95)
                create_memory(session, settings, scope, fact, utcnow(), actor=Actor.API)
    erasing = threading.Event()
    stop = threading.Event()

    def others() -> None:
        for n in range(10**6):
            if stop.is_set():
                return
            key = say(client, f"other-{n % 20}", f"e{n}", [pool[n % len(pool)]])
            started = time.perf_counter()
            extract_session(settings, key)
            took = (time.perf_counter() - started) * 1000
            (run.others_during_ms if erasing.is_set() else run.others_before_ms).append(took)

    thread = threading.Thread(target=others)
    thread.start()
    time.sleep(3.0)
    erasing.set()
    started = time.perf_counter()
    erased = client.erase(AGENT, "heavy", actor="bench")
    run.erase_s = time.perf_counter() - started
    stop.set()
    thread.join()
    run.erased_rows = sum(erased.rows.values())


def mean_of(per_day: dict[int, list[int]], days: list[int]) -> float:
    values = [v for d in days for v in per_day.get(d, [])]
    return sum(values) / max(len(values), 1)


def p95_of(per_day: dict[int, list[float]], days: list[int]) -> float:
    return percentile([ms for d in days for ms in per_day[d]], 95)


Row = tuple[str, float, str, float | None]


def week_pair(
    measure: str, unit: str, weeks: tuple[str, str], early: float, late: float
) -> list[Row]:
    """The baseline week's figure and the last week's, against it."""
    return [
        (f"{measure}, days {weeks[0]} (baseline)", early, unit, 1.0),
        (f"{measure}, days {weeks[1]}", late, unit, late / early if early else None),
    ]


def erase_rows(run: Run) -> list[Row]:
    """The erasure, and other scopes' extractions before and while it ran. The slowest
    one before shows how far this machine alone strays from the median (a loaded
    machine: several times it), the median while erasing how much the erasure slows a
    typical extraction down, and the slowest while erasing how long the erasure kept
    one out at worst (on SQLite, about one chunk: memories/erasure.py)."""
    before, during = run.others_before_ms or [0.0], run.others_during_ms or [0.0]
    base = percentile(before, 50)
    rows: list[tuple[str, float]] = [
        ("others' extraction max before", max(before)),
        ("others' extraction p50 while erasing", percentile(during, 50)),
        ("others' extraction max while erasing", max(during)),
    ]
    return [
        ("erase a user with its memories", run.erase_s, "s", None),
        ("others' extraction p50 before (baseline)", base, "ms", 1.0),
        *((name, ms, "ms", ms / base if base else None) for name, ms in rows),
    ]


def report(kind: str, run: Run, days: int) -> dict[str, float | None]:
    first = min(CHECK_EVERY, days)
    early = [d for d in run.cycle_ms if first - WEEK < d <= first]
    late = [d for d in run.cycle_ms if d > days - WEEK]
    weeks = (f"{first - WEEK + 1}-{first}", f"{days - WEEK + 1}-{days}")
    cycle_early, cycle_late = (sum(run.cycle_ms[d] for d in w) / len(w) for w in (early, late))
    recall_early, recall_late = (p95_of(run.recall_ms, w) for w in (early, late))
    probe_early, probe_late = (p95_of(run.probe_ms, w) for w in (early, late))
    held_early, held_late = (mean_of(run.held, w) for w in (early, late))
    hits_early, hits_late = (mean_of(run.hits, w) for w in (early, late))
    rows: list[Row] = [
        *week_pair("maintenance cycle", "ms", weeks, cycle_early, cycle_late),
        *week_pair("probe recall p95", "ms", weeks, probe_early, probe_late),
        *week_pair("users' recall p95", "ms", weeks, recall_early, recall_late),
        *week_pair("users' memories held", "", weeks, held_early, held_late),
        *week_pair("hits per users' recall", "", weeks, hits_early, hits_late),
        *erase_rows(run),
    ]
    print_table(f"{kind}: retention over {days} days", rows)
    counts = {day: check.total for day, check in sorted(run.checks.items())}
    print(f"\n{'table':<22}" + "".join(f"{'day ' + str(d):>12}" for d in counts))
    for table in sorted(counts[0]):
        print(f"{table:<22}" + "".join(f"{counts[d][table]:>12}" for d in counts))
    last = max(counts)
    previous = max([d for d in counts if d <= last - CHECK_EVERY] or [min(counts)])
    return {
        f"{kind}_cycle_ratio": cycle_late / cycle_early,
        f"{kind}_probe_recall_p95_ratio": probe_late / probe_early,
        f"{kind}_users_recall_p95_ratio": recall_late / recall_early,
        f"{kind}_users_memories_ratio": held_late / held_early,
        f"{kind}_erase_s": run.erase_s,
        f"{kind}_erased_rows": float(run.erased_rows),
        f"{kind}_others_max_while_erasing_ms": max(run.others_during_ms or [0.0]),
        f"{kind}_others_max_before_ms": max(run.others_before_ms or [0.0]),
        **{
            f"{kind}_{table}_growth_last_30_days": counts[last][table]
            / max(counts[previous][table], 1)
            for table in ("turns", "memory_usage", "extraction_batches", "memory_events")
        },
    }


def aged(half_life_days: float) -> tuple[float, float]:
    """Memories' half-lives (long tier, short tier): the long tier's `half_life_days`,
    the short tier's in the defaults' proportion (7 to 90), so that unused memories are
    archived (and then purged) within the bench's months, as within a real store's years."""
    fields = SETTING_FIELDS
    default_long, default_short = (
        float(fields[name].default) for name in ("half_life_long_days", "half_life_short_days")
    )
    return half_life_days, half_life_days * default_short / default_long


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--days", type=int, default=180)
    parser.add_argument("--share", type=float, default=0.05, help="users who chat each day")
    parser.add_argument("--erase-memories", type=int, default=5000)
    parser.add_argument("--retention-days", type=int, default=14)
    parser.add_argument(
        "--half-life-days",
        type=float,
        default=4.0,
        help="long-tier half-life (the short tier's in proportion); 90 is the default's",
    )
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument(
        "--check-every", type=int, default=CHECK_EVERY, help="days between table checks"
    )
    args = parser.parse_args()
    figures: dict[str, float | None] = {}
    for kind in [d for d in args.databases.split(",") if d]:
        run = Run()
        with (
            tempfile.TemporaryDirectory(prefix="memoryd-lifecycle-") as tmp,
            bench_database(kind, Path(tmp), "lifecycle") as url,
        ):
            days = args.retention_days
            long_days, short_days = aged(args.half_life_days)
            settings = Settings(
                data_dir=Path(tmp),
                database_url=url,
                offline_extractor=True,
                turn_retention_days=days,
                usage_retention_days=days,
                batch_retention_days=days,
                deleted_retention_days=days,
                archived_retention_days=days,
                half_life_long_days=long_days,
                half_life_short_days=short_days,
            )
            simulate(settings, args.users, args.days, args.share, run, args.check_every)
            erase_under_load(settings, args.erase_memories, run)
            figures |= report(kind, run, args.days)
            per_day = chatting(args.users, args.share)
            figures |= growth.report(kind, run.checks, per_day, args.retention_days)
            dispose_engines()
    emit(figures)


if __name__ == "__main__":
    main()
