"""End-to-end extraction throughput through real Celery workers on PostgreSQL + Redis.

Turns are stored first (no triggers), workers are started, then every session is ended
at once and the clock runs until every turn is done. The LLM is the test suite's fake
OpenAI server, answering at once or after 500 ms per call.

Worker choice: an extraction task spends almost all its time waiting on the LLM (and a
little on PostgreSQL), so each worker uses the threads pool with high concurrency
(`--pool=threads -c 16`, settings.worker.worker_concurrency's default): threads are cheap, share
one engine pool, and release the GIL while they wait. Prefork would need one process per
concurrent call. Two worker processes use both cores for the CPU part (prompt rendering,
JSON parsing, reconcile) despite the GIL. With 32 calls in flight, a 500 ms LLM and 20
turns per batch bound throughput at 32 / 0.5 s x 20 = 1280 msg/s. The baseline is one
worker with concurrency 1, same run, and the ratios are against it.

    .venv/bin/python bench/pipeline.py [--users 300] [--turns 40]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis
from sqlalchemy import event, func, select, text

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the repository, not bench/
from bench.common import REDIS_URL, emit, print_table, scratch_database
from bench.usage import postmaster_pid, process_seconds, tree_seconds
from memoryd.client import MemoryClient
from memoryd.extraction.batch import extract_session
from memoryd.models.db import get_engine, session_scope
from memoryd.models.keys import SessionKey
from memoryd.models.tables import ExtractionBatch
from memoryd.settings import Settings
from testkit.fakellm import FakeLLM
from testkit.workers import start_worker, turns_left, wait_until

LINES = [
    "Call me {name}.",
    "I live in {city}.",
    "I prefer short answers.",
    "What's the weather like?",
    "My favourite editor is vim.",
    "Can you summarise this article for me?",
    "Please remember that I am vegetarian.",
    "Thanks, that helps.",
]
CITIES = ["Berlin", "Lisbon", "Osaka", "Lima", "Oslo"]


def conversation(user: int, turns: int) -> list[dict[str, str]]:
    out = []
    for i in range(turns):
        role = "user" if i % 2 == 0 else "assistant"
        line = LINES[(i // 2) % len(LINES)] if role == "user" else "Sure, noted."
        out.append(
            {
                "agent_id": "bench",
                "user_id": f"u{user}",
                "session_id": f"u{user}-s",
                "role": role,
                "content": line.format(name=f"User{user}", city=CITIES[user % len(CITIES)]),
            }
        )
    return out


def reset(url: str) -> None:
    with get_engine(Settings(database_url=url).storage).begin() as conn:
        conn.execute(
            text(
                "TRUNCATE turns, sessions, memories, memory_events, memory_usage,"
                " memory_tallies, extraction_batches RESTART IDENTITY CASCADE"
            )
        )
    redis.Redis.from_url(REDIS_URL).flushdb()


def run(
    url: str, delay: float, users: int, turns: int, workers: int, concurrency: int
) -> dict[str, float]:
    reset(url)
    with FakeLLM(delay=delay) as llm, tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            database_url=url,
            broker_url=REDIS_URL,
            llm_base_url=llm.base_url,
            llm_api_key="bench",
            data_dir=Path(tmp),
        )
        client = MemoryClient(settings)
        for u in range(users):
            MemoryClient(settings, dispatch=False).enqueue_turns(conversation(u, turns))
        procs = [
            start_worker(settings, Path(tmp), name=f"w{i}", concurrency=concurrency)
            for i in range(workers)
        ]
        try:
            time.sleep(3)  # workers connected before the clock starts
            postmaster = postmaster_pid(url)
            cpu_before = _cpu(procs, postmaster)
            start = time.perf_counter()
            for u in range(users):
                client.end_session("bench", f"u{u}", f"u{u}-s")
            wait_until(
                lambda: turns_left(settings) == 0,
                600,
                interval=0.1,
                what="all turns extracted",
                procs=tuple(procs),
            )
            elapsed = time.perf_counter() - start
            workers_cpu, postgres_cpu = (after - before for after, before in zip(
                _cpu(procs, postmaster), cpu_before, strict=True
            ))  # fmt: skip
        finally:
            for p in procs:
                p.stop()
        with session_scope(settings.storage) as session:
            calls, tokens = session.execute(
                select(func.sum(ExtractionBatch.llm_calls), func.sum(ExtractionBatch.tokens_in))
            ).one()
    messages = users * turns
    return {
        "msgs_per_s": messages / elapsed,
        "calls_per_msg": calls / messages,
        "tokens_per_msg": tokens / messages,
        "seconds": elapsed,
        "worker_cpu_per_1000": workers_cpu / messages * 1000,
        "postgres_cpu_per_1000": postgres_cpu / messages * 1000,
    }


def _cpu(procs: list[Any], postmaster: int | None) -> tuple[float, float]:
    """CPU seconds so far of the worker processes, and of PostgreSQL (0 when its
    processes cannot be read: a server elsewhere)."""
    workers = sum(process_seconds(p.process.pid) for p in procs)
    return workers, tree_seconds(postmaster) if postmaster else 0.0


def statements_per_batch(url: str, sessions: int, turns: int) -> float:
    """Statements sent to PostgreSQL per extracted batch, counted in this process over
    `sessions` sessions extracted by extract_session with an instant scripted model."""
    reset(url)
    counted = [0]

    def count(*_args: Any) -> None:
        counted[0] += 1

    with FakeLLM() as llm, tempfile.TemporaryDirectory() as tmp:
        settings = Settings(database_url=url, llm_base_url=llm.base_url, llm_api_key="bench",
                            data_dir=Path(tmp))  # fmt: skip
        client = MemoryClient(settings, dispatch=False)
        for u in range(sessions):
            client.enqueue_turns(conversation(u, turns))
            client.end_session("bench", f"u{u}", f"u{u}-s")
        engine = get_engine(settings.storage)
        event.listen(engine, "before_cursor_execute", count)
        try:
            batches = sum(
                extract_session(settings, SessionKey("bench", f"u{u}", f"u{u}-s")).batches
                for u in range(sessions)
            )
        finally:
            event.remove(engine, "before_cursor_execute", count)
    return counted[0] / max(batches, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--users", type=int, default=300)
    parser.add_argument("--turns", type=int, default=40)
    args = parser.parse_args()
    with scratch_database("memoryd_bench_pipeline") as url:
        base = run(url, 0.0, 50, args.turns, workers=1, concurrency=1)
        instant = run(url, 0.0, args.users, args.turns, workers=2, concurrency=16)
        base_slow = run(url, 0.5, 20, args.turns, workers=1, concurrency=1)
        slow = run(url, 0.5, args.users, args.turns, workers=2, concurrency=16)
        statements = statements_per_batch(url, 30, args.turns)
    redis.Redis.from_url(REDIS_URL).flushdb()
    print_table(
        f"pipeline: PostgreSQL + Redis, {args.users} sessions x {args.turns} turns, "
        "2 workers x 16 threads",
        [
            ("baseline: 1 worker x 1 thread, instant LLM", base["msgs_per_s"], "msg/s", 1.0),
            (
                "instant LLM (target >= 500)",
                instant["msgs_per_s"],
                "msg/s",
                instant["msgs_per_s"] / base["msgs_per_s"],
            ),
            ("baseline: 1 worker x 1 thread, 500 ms LLM", base_slow["msgs_per_s"], "msg/s", 1.0),
            (
                "500 ms LLM (target >= 150)",
                slow["msgs_per_s"],
                "msg/s",
                slow["msgs_per_s"] / base_slow["msgs_per_s"],
            ),
            ("LLM calls per message (target <= 0.1)", instant["calls_per_msg"], "calls", None),
            ("prompt tokens per message", instant["tokens_per_msg"], "tokens", None),
            ("worker CPU per 1000 turns, instant LLM", instant["worker_cpu_per_1000"], "s",
             instant["worker_cpu_per_1000"] / base["worker_cpu_per_1000"]),
            ("PostgreSQL CPU per 1000 turns, instant LLM", instant["postgres_cpu_per_1000"], "s",
             instant["postgres_cpu_per_1000"] / base["postgres_cpu_per_1000"]
             if base["postgres_cpu_per_1000"] else None),
            ("statements per batch", statements, "stmts", None),
        ],
    )  # fmt: skip
    emit(
        {
            "instant_msgs_per_s": instant["msgs_per_s"],
            "slow_llm_msgs_per_s": slow["msgs_per_s"],
            "llm_calls_per_msg": instant["calls_per_msg"],
            "prompt_tokens_per_msg": instant["tokens_per_msg"],
            "worker_cpu_s_per_1000_turns": instant["worker_cpu_per_1000"],
            "postgres_cpu_s_per_1000_turns": instant["postgres_cpu_per_1000"],
            "statements_per_batch": statements,
        }
    )


if __name__ == "__main__":
    main()
