"""HTTP overhead of `memoryd serve` on PostgreSQL: the same ingest and context calls made
in process (MemoryClient, the baseline, measured in the same run) and through uvicorn with
4 workers over a keep-alive loopback connection.

    .venv/bin/python bench/http_api.py [--ingest 3000] [--context 500]

Target: the HTTP overhead of ingest at p99 stays under 1.5 ms.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's folder leads sys.path, and this file's name would hide the
# standard library's `http` package: the repository takes its place (every bench does so).
sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import time
from typing import Any

from bench.common import REDIS_URL, bench_turn, emit, percentile, print_table, scratch_database
from memoryd.client import MemoryClient
from memoryd.models.db import session_scope, utcnow
from memoryd.server.keys import KeySpec, create_key
from memoryd.settings import Settings

WARMUP = 200
WORKERS = 4
USERS = 50
FACTS = [
    "Vegetarian since 2020",
    "Lives in Lisbon with two cats",
    "Prefers short answers in English",
    "Works on the payments refactor, due in April",
    "Allergic to peanuts",
    "Runs every morning before work",
]
QUERIES = ["what should I cook tonight", "where do I live", "how should you answer me"]


def timed(fn: Any, n: int) -> list[float]:
    latencies = []
    for i in range(n + WARMUP):
        start = time.perf_counter()
        fn(i)
        if i >= WARMUP:
            latencies.append((time.perf_counter() - start) * 1000)
    return latencies


def spare_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(url: str, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "MEMORYD_DATABASE_URL": url, "MEMORYD_BROKER_URL": REDIS_URL}
    server = subprocess.Popen(
        [sys.executable, "-m", "memoryd", "serve", "--port", str(port), "--workers", str(WORKERS)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/v1/health")
            if conn.getresponse().status == 200:
                return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit(
        f"memoryd serve did not start: {server.stderr.read().decode() if server.stderr else ''}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ingest", type=int, default=3000)
    parser.add_argument("--context", type=int, default=500)
    args = parser.parse_args()

    with scratch_database("memoryd_bench_http") as url:
        settings = Settings(database_url=url, broker_url=REDIS_URL)
        client = MemoryClient(settings)
        for u in range(USERS):
            for fact in FACTS:
                client.remember("bench", f"user-{u}", fact)
        with session_scope(settings.storage) as session:
            _, key = create_key(session, KeySpec(name="bench", agent_ids=["bench"]), utcnow())

        # In process: what a Python backend pays.
        local_ingest = timed(lambda i: client.enqueue_turn(bench_turn(i, USERS)), args.ingest)
        local_context = timed(
            lambda i: client.build_context(QUERIES[i % 3], "bench", f"user-{i % USERS}"),
            args.context,
        )

        port = spare_port()
        server = start_server(url, port)
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port)
            headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

            def post(path: str, body: dict[str, Any]) -> None:
                conn.request("POST", path, json.dumps(body), headers)
                response = conn.getresponse()
                response.read()
                if response.status >= 300:
                    raise SystemExit(f"{path}: {response.status}")

            offset = args.ingest + WARMUP  # fresh turns, not duplicates of the local ones
            http_ingest = timed(
                lambda i: post("/v1/turns", bench_turn(offset + i, USERS)), args.ingest
            )
            http_context = timed(
                lambda i: post(
                    "/v1/context",
                    {"agent_id": "bench", "user_id": f"user-{i % USERS}", "query": QUERIES[i % 3]},
                ),
                args.context,
            )
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
        client.close()

    figures = {
        "local_ingest_p50_ms": percentile(local_ingest, 50),
        "local_ingest_p99_ms": percentile(local_ingest, 99),
        "http_ingest_p50_ms": percentile(http_ingest, 50),
        "http_ingest_p99_ms": percentile(http_ingest, 99),
        "local_context_p95_ms": percentile(local_context, 95),
        "http_context_p95_ms": percentile(http_context, 95),
    }
    figures["ingest_overhead_p99_ms"] = (
        figures["http_ingest_p99_ms"] - figures["local_ingest_p99_ms"]
    )
    figures["context_overhead_p95_ms"] = (
        figures["http_context_p95_ms"] - figures["local_context_p95_ms"]
    )

    def ratio(name: str, base: str) -> float:
        return figures[name] / figures[base]

    print_table(
        f"HTTP vs in process ({args.ingest} ingests, {args.context} contexts, "
        f"uvicorn --workers {WORKERS}, PostgreSQL)",
        [
            ("in-process enqueue_turn p50", figures["local_ingest_p50_ms"], "ms", 1.0),
            ("in-process enqueue_turn p99", figures["local_ingest_p99_ms"], "ms", 1.0),
            (
                "POST /v1/turns p50",
                figures["http_ingest_p50_ms"],
                "ms",
                ratio("http_ingest_p50_ms", "local_ingest_p50_ms"),
            ),
            (
                "POST /v1/turns p99",
                figures["http_ingest_p99_ms"],
                "ms",
                ratio("http_ingest_p99_ms", "local_ingest_p99_ms"),
            ),
            (
                "HTTP overhead of ingest at p99 (target <= 1.5)",
                figures["ingest_overhead_p99_ms"],
                "ms",
                None,
            ),
            ("in-process build_context p95", figures["local_context_p95_ms"], "ms", 1.0),
            (
                "POST /v1/context p95",
                figures["http_context_p95_ms"],
                "ms",
                ratio("http_context_p95_ms", "local_context_p95_ms"),
            ),
        ],
    )
    emit(figures)


if __name__ == "__main__":
    main()
