"""Enqueue latency and bulk throughput on PostgreSQL, against a bare insert+commit.

Single turns go through MemoryClient.enqueue_turn exactly as a chat backend calls it:
validation, the turn insert, the session upsert, the commit, and a Celery message to
Redis whenever a session fills a batch. The baseline is a bare psycopg INSERT + COMMIT
of the same row on its own connection, alternating with the enqueues. Bulk calls of 1,000
are set against a bare COPY of the same rows into the same table, in three shapes: turns
spread over 2,000 users, whole sessions of 50 turns as a history import sends them, and
one conversation of 1,000 turns a call; SQLite's bulk rate is reported beside them.

    .venv/bin/python bench/ingest.py [--single 3000] [--bulk-calls 20]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import redis

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the repository, not bench/
from bench.common import (
    REDIS_URL,
    bench_database,
    bench_turn,
    emit,
    percentile,
    print_table,
    scratch_database,
)
from memoryd.client import MemoryClient
from memoryd.models.db import dispose_engines
from memoryd.settings import Settings

WARMUP = 200
# A chat history import sends whole sessions, in order: this many turns each.
IMPORT_SESSION_TURNS = 50


def single_latencies(
    url: str, client: MemoryClient, n: int
) -> tuple[list[float], list[float], int]:
    """Latencies in ms of a bare INSERT+COMMIT and of enqueue_turn, one of each in turn,
    which goes first alternating: both meet the same disk and host (a commit's fsync
    time drifts over seconds on a shared machine, and measured one run after the other,
    the p99s followed that drift). Also how many enqueues sent an extract trigger."""
    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    bare, enqueued = [], []
    dispatched = 0
    with psycopg.connect(dsn) as conn:

        def insert(t: dict[str, str]) -> float:
            start = time.perf_counter()
            conn.execute(
                "INSERT INTO turns (agent_id, user_id, session_id, role, content, created_at,"
                " status, attempts, token_count) VALUES (%s, %s, %s, %s, %s, %s, 'pending', 0, 0)",
                (t["agent_id"], t["user_id"], "bare", t["role"], t["content"], datetime.now(UTC)),
            )
            conn.commit()
            return (time.perf_counter() - start) * 1000

        def enqueue(t: dict[str, str]) -> tuple[float, int]:
            start = time.perf_counter()
            result = client.enqueue_turn(t)
            return (time.perf_counter() - start) * 1000, result.dispatched_sessions

        for i in range(n + WARMUP):
            t = bench_turn(i)
            if i % 2:
                took_bare, (took, sent) = insert(t), enqueue(t)
            else:
                (took, sent), took_bare = enqueue(t), insert(t)
            if i >= WARMUP:
                bare.append(took_bare)
                enqueued.append(took)
                dispatched += sent
        conn.execute("DELETE FROM turns WHERE session_id = 'bare'")
        conn.commit()
    return bare, enqueued, dispatched


def bulk_rate(
    client: MemoryClient, calls: int, size: int = 1000, session_turns: int | None = None
) -> float:
    """Turns a second through enqueue_turns, `calls` calls of `size` turns. Each call's
    turns spread over 2,000 users, about one turn per session (what a gateway batching
    live traffic sends); with `session_turns`, whole sessions of that many turns in order
    instead (a chat history import): a call then bumps size / session_turns sessions."""
    offset = 10_000_000 if session_turns is None else 30_000_000
    batches = [
        [_bulk_turn(offset + c * size + i, session_turns) for i in range(size)]
        for c in range(calls)
    ]
    start = time.perf_counter()
    for batch in batches:
        result = client.enqueue_turns(batch)
        assert result.accepted == size, result
    return calls * size / (time.perf_counter() - start)


def _bulk_turn(i: int, session_turns: int | None) -> dict[str, str]:
    if session_turns is None:
        return bench_turn(i, users=2000)
    session = i // session_turns
    return {**bench_turn(i), "user_id": f"user-{session % 2000}", "session_id": f"import-{session}"}


def bare_copy_rate(url: str, calls: int, size: int = 1000) -> float:
    """Rows a second for a bare COPY of the same turns into the turns table, a commit per
    `size` rows: what the database itself takes in."""
    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    now = datetime.now(UTC)
    batches = [[bench_turn(20_000_000 + c * size + i) for i in range(size)] for c in range(calls)]
    columns = "agent_id, user_id, session_id, role, content, created_at, status, attempts"
    with psycopg.connect(dsn) as conn:
        start = time.perf_counter()
        for batch in batches:
            with conn.cursor().copy(f"COPY turns ({columns}, token_count) FROM STDIN") as copy:
                for t in batch:
                    copy.write_row((t["agent_id"], t["user_id"], t["session_id"], t["role"],
                                    t["content"], now, "pending", 0, 0))  # fmt: skip
            conn.commit()
        rate = calls * size / (time.perf_counter() - start)
        conn.execute("TRUNCATE turns")
        conn.commit()
    return rate


def sqlite_bulk_rate(calls: int) -> float:
    with tempfile.TemporaryDirectory() as folder:
        with bench_database("sqlite", Path(folder), "ingest") as url:
            rate = bulk_rate(MemoryClient(Settings(database_url=url), dispatch=False), calls)
        dispose_engines()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--single", type=int, default=3000)
    parser.add_argument("--bulk-calls", type=int, default=20)
    args = parser.parse_args()

    redis.Redis.from_url(REDIS_URL).flushdb()
    with scratch_database("memoryd_bench_ingest") as url:
        settings = Settings(database_url=url, broker_url=REDIS_URL)
        client = MemoryClient(settings)
        base, single, dispatched = single_latencies(url, client, args.single)
        copy_rate = bare_copy_rate(url, args.bulk_calls)
        rate = bulk_rate(client, args.bulk_calls)
        import_rate = bulk_rate(client, args.bulk_calls, session_turns=IMPORT_SESSION_TURNS)
        # One long conversation a call: its turns span every chunk of the call.
        long_rate = bulk_rate(client, args.bulk_calls, session_turns=1000)
        client.flush()  # triggers reach Redis before its db is flushed
        bare_rate = 1000 / (sum(base) / len(base))
    redis.Redis.from_url(REDIS_URL).flushdb()
    sqlite_rate = sqlite_bulk_rate(args.bulk_calls)

    p50, p99 = percentile(single, 50), percentile(single, 99)
    b50, b99 = percentile(base, 50), percentile(base, 99)
    print_table(
        f"ingest on PostgreSQL ({args.single} single turns, {dispatched} of them sent an "
        f"extract trigger; {args.bulk_calls} bulk calls of 1000)",
        [
            ("baseline: bare INSERT+COMMIT p50", b50, "ms", 1.0),
            ("baseline: bare INSERT+COMMIT p99", b99, "ms", 1.0),
            ("enqueue_turn p50", p50, "ms", p50 / b50),
            ("enqueue_turn p99 (target <= 1.25x)", p99, "ms", p99 / b99),
            ("baseline: bare single-row inserts/s", bare_rate, "turns/s", 1.0),
            ("baseline: bare COPY, 1000 a commit", copy_rate, "turns/s", copy_rate / bare_rate),
            ("enqueue_turns bulk (target >= 40000/s)", rate, "turns/s", rate / bare_rate),
            ("enqueue_turns bulk vs bare COPY", rate, "turns/s", rate / copy_rate),
            ("bulk, history import vs bare COPY", import_rate, "turns/s", import_rate / copy_rate),
            (
                "bulk, one conversation a call vs bare COPY",
                long_rate,
                "turns/s",
                long_rate / copy_rate,
            ),
            ("enqueue_turns bulk on SQLite", sqlite_rate, "turns/s", sqlite_rate / bare_rate),
        ],
    )
    emit(
        {
            "enqueue_p50_ms": p50,
            "enqueue_p99_ms": p99,
            "bulk_turns_per_s": rate,
            "import_bulk_turns_per_s": import_rate,
            "one_session_bulk_turns_per_s": long_rate,
            "bare_copy_rows_per_s": copy_rate,
            "sqlite_bulk_turns_per_s": sqlite_rate,
            "baseline_insert_p50_ms": b50,
            "baseline_insert_p99_ms": b99,
        }
    )


if __name__ == "__main__":
    main()
