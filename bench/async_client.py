"""AsyncMemoryClient under load: 1,000 calls at once from coroutines, against the same
1,000 calls made with the sync MemoryClient from a pool of as many threads (the
baseline, measured in the same run on the same store).

Half the calls store a turn (`enqueue_turn`), half recall a user's memories
(`recall`), over 20 users with 25 memories each. Each call's latency is counted from
the moment all were started to its own end, so it holds the wait for a thread (the
async client's pool has `db_pool_size` threads, 10 by default; the baseline pool as
many): what a request handler awaiting it would see. Reported per database: p50 and
p99 of each, and how long the event loop was held at most (a heartbeat coroutine
ticking every millisecond meanwhile: its longest gap).

    .venv/bin/python bench/async_client.py                     # SQLite and PostgreSQL
    .venv/bin/python bench/async_client.py --databases sqlite --calls 200
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the repository, not bench/

from bench.common import bench_database, emit, percentile, print_table
from memoryd import AsyncMemoryClient, MemoryClient
from memoryd.settings import Settings

AGENT = "bench"
USERS = 20
MEMORIES_PER_USER = 25
TOPICS = ["tea", "hiking", "jazz", "Lisbon", "cycling", "sushi", "chess", "piano", "Dune"]


def fill(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    for u in range(USERS):
        for m in range(MEMORIES_PER_USER):
            topic = TOPICS[(u + m) % len(TOPICS)]
            client.remember(AGENT, f"u{u}", f"Likes {topic}, noted on visit {u}-{m} as a {m}")


def call_args(i: int) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """The i-th call: a method name and its arguments, the same in both runs."""
    user = f"u{i % USERS}"
    if i % 2:
        return "recall", (f"what about {TOPICS[i % len(TOPICS)]}", AGENT, user), {"k": 5}
    turn = {"agent_id": AGENT, "user_id": user, "session_id": f"s{i}", "role": "user"}
    return "enqueue_turn", (), {**turn, "content": f"Message {i}: I like {TOPICS[i % 9]}."}


def run_async(settings: Settings, calls: int) -> tuple[dict[str, list[float]], float]:
    async def main() -> tuple[dict[str, list[float]], float]:
        times: dict[str, list[float]] = {"enqueue_turn": [], "recall": []}
        longest_gap = 0.0
        running = True

        async def heartbeat() -> None:
            nonlocal longest_gap
            last = time.perf_counter()
            while running:
                await asyncio.sleep(0.01)
                now = time.perf_counter()
                longest_gap = max(longest_gap, now - last)
                last = now

        async with AsyncMemoryClient(settings, dispatch=False) as memory:
            beat = asyncio.create_task(heartbeat())
            await asyncio.sleep(0.01)
            started = time.perf_counter()

            async def one(i: int) -> None:
                name, args, kwargs = call_args(i)
                await getattr(memory, name)(*args, **kwargs)
                times[name].append((time.perf_counter() - started) * 1000)

            await asyncio.gather(*(one(i) for i in range(calls)))
            running = False
            await beat
        return times, longest_gap * 1000

    return asyncio.run(main())


def run_threads(settings: Settings, calls: int) -> dict[str, list[float]]:
    client = MemoryClient(settings, dispatch=False)
    times: dict[str, list[float]] = {"enqueue_turn": [], "recall": []}

    def one(i: int, started: float) -> None:
        name, args, kwargs = call_args(i)
        method: Callable[..., Any] = getattr(client, name)
        method(*args, **kwargs)
        times[name].append((time.perf_counter() - started) * 1000)

    with ThreadPoolExecutor(max_workers=settings.storage.db_pool_size) as pool:
        started = time.perf_counter()
        for future in [pool.submit(one, i, started) for i in range(calls)]:
            future.result()
    return times


def measure(kind: str, calls: int, folder: Path) -> dict[str, float]:
    with bench_database(kind, folder, "async") as url:
        settings = Settings(database_url=url, data_dir=folder)
        fill(settings)
        run_threads(settings, min(calls, 100))  # warm both paths: caches, connections
        baseline = run_threads(settings, calls)
        awaited, gap = run_async(settings, calls)
    figures: dict[str, float] = {f"{kind}_loop_held_max_ms": gap}
    rows: list[tuple[str, float, str, float | None]] = []
    for name in ("enqueue_turn", "recall"):
        for q in (50, 99):
            base, value = percentile(baseline[name], q), percentile(awaited[name], q)
            rows.append((f"{name} p{q}, sync client in threads", base, "ms", 1.0))
            rows.append((f"{name} p{q}, AsyncMemoryClient", value, "ms", value / base))
            figures[f"{kind}_{name}_p{q}_ms"] = value
            figures[f"{kind}_{name}_p{q}_ratio"] = value / base
    rows.append(("event loop held at most", gap, "ms", None))
    print_table(f"{calls} calls at once on {kind}", rows)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="memoryd-async-") as folder:
        for kind in args.databases.split(","):
            sub = Path(folder) / kind
            sub.mkdir()
            figures.update(measure(kind, args.calls, sub))
    emit(figures)


if __name__ == "__main__":
    main()
