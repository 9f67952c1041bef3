"""Read-your-writes cost: recall and build_context latency in a scope of N memories with
20 user turns not yet extracted, against the same calls with none pending (the
baseline, same run, same scope), on SQLite and PostgreSQL.

    .venv/bin/python bench/pending.py [--memories 5000] [--queries 300] [--model NAME]

With --model (a local embedding model, e.g. multilingual-e5-small), memories and turns
are matched by meaning too; every memory is embedded before the timing starts.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the repository, not bench/

from bench.common import bench_database, emit, percentile, print_table
from memoryd.client import MemoryClient
from memoryd.memories.proposals import Fact
from memoryd.memories.store import create_memory
from memoryd.models.base import Actor
from memoryd.models.db import dispose_engines, session_scope, utcnow
from memoryd.models.keys import Scope
from memoryd.recall.backfill import fill_missing
from memoryd.settings import Settings

WORDS = [
    "tea", "coffee", "porto", "lisbon", "berlin", "cello",
    "running", "garden", "python", "rust", "pasta", "jazz",
]  # fmt: skip
PENDING = 20


def _fill(settings: Settings, memories: int) -> None:
    scope, now, rng = Scope("bot", "ann"), utcnow(), random.Random(7)
    with session_scope(settings.storage) as session:
        for n in range(memories):
            text = " ".join(rng.sample(WORDS, 3)) + f" note {n}"
            create_memory(session, settings, scope, Fact(content=text, confidence=0.9), now,
                          actor=Actor.API)  # fmt: skip


def _timed(call: Callable[[str, str, str], object], asks: list[str]) -> list[float]:
    times = []
    for query in asks:
        started = time.perf_counter()
        call(query, "bot", "ann")
        times.append((time.perf_counter() - started) * 1000)
    return times


def measure(database: str, memories: int, queries: int, model: str | None) -> dict[str, float]:
    with (
        tempfile.TemporaryDirectory() as folder,
        bench_database(database, Path(folder), "pending") as url,
    ):
        extra = {"embedding_provider": "local", "embedding_model": model} if model else {}
        settings = Settings(data_dir=Path(folder), database_url=url, **extra)
        _fill(settings, memories)
        while model and fill_missing(settings):
            pass
        client = MemoryClient(settings, dispatch=False)
        rng = random.Random(11)
        asks = [f"what about {' '.join(rng.sample(WORDS, 2))}?" for _ in range(queries)]
        figures: dict[str, float] = {}
        for label, pending in (("none pending", 0), ("20 pending", PENDING)):
            client.enqueue_turns([
                {"agent_id": "bot", "user_id": "ann", "session_id": f"s-{label}",
                 "role": "user", "content": f"I just said {' '.join(rng.sample(WORDS, 4))}"}
                for _ in range(pending)
            ])  # fmt: skip
            for kind, call in (("recall", client.recall), ("context", client.build_context)):
                _timed(call, asks)  # warm: query vectors and the scope's cache, both runs
                times = _timed(call, asks)
                figures[f"{database}_{kind}_p95_ms_{label.split()[0]}"] = round(
                    percentile(times, 95), 2
                )
        dispose_engines()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--model", help="a local embedding model (default: none)")
    args = parser.parse_args()
    figures: dict[str, float] = {}
    for database in args.databases.split(","):
        got = measure(database, args.memories, args.queries, args.model)
        figures.update(got)
        rows: list[tuple[str, float, str, float | None]] = []
        for kind in ("recall", "context"):
            base = got[f"{database}_{kind}_p95_ms_none"]
            rows.append((f"{kind} p95, none pending (baseline)", base, "ms", 1.0))
            with_pending = got[f"{database}_{kind}_p95_ms_20"]
            rows.append((f"{kind} p95, 20 pending", with_pending, "ms", with_pending / base))
        title = f"pending turns in recall: {database}, {args.memories} memories"
        print_table(title + (f", {args.model}" if args.model else ""), rows)
    emit(figures)


if __name__ == "__main__":
    main()
