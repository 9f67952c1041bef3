"""Shared bench plumbing: a throwaway PostgreSQL database, percentiles, the result table."""

from __future__ import annotations

import json
import os
import socket
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # imported by a script that did not put it there
    sys.path.insert(0, str(REPO_ROOT))

from sqlalchemy import create_engine, text

from testkit import databases as testkit_databases

PG_SERVER = os.environ.get("MEMORYD_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432")
REDIS_URL = os.environ.get("MEMORYD_BENCH_REDIS", "redis://127.0.0.1:6379/4")


def postgres_reachable() -> str | None:
    """None when the PostgreSQL server answers, else why not."""
    from sqlalchemy.engine import make_url

    url = make_url(f"{PG_SERVER}/postgres")
    try:
        socket.create_connection((url.host or "127.0.0.1", url.port or 5432), timeout=2).close()
        engine = create_engine(url, connect_args={"connect_timeout": 5})
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
    except Exception as exc:
        return f"PostgreSQL at {PG_SERVER} does not answer ({type(exc).__name__})"
    return None


@contextmanager
def scratch_database(prefix: str) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database on the bench's server, dropped afterwards."""
    with testkit_databases.scratch_database(PG_SERVER, prefix) as url:
        yield url


@contextmanager
def bench_database(kind: str, folder: Path, name: str) -> Iterator[str]:
    """A fresh, migrated database of `kind` ("sqlite": a new file in `folder`;
    "postgres": a scratch database, dropped afterwards), named after the bench."""
    if kind == "postgres":
        with scratch_database(f"memoryd_bench_{name}") as url:
            yield url
        return
    if kind != "sqlite":
        raise ValueError(f"unknown database {kind!r}: sqlite or postgres")
    from memoryd.models.migrate import upgrade
    from memoryd.settings import Settings

    url = f"sqlite:///{folder / f'{name}-{uuid.uuid4().hex[:8]}.db'}"
    upgrade(Settings(data_dir=folder, database_url=url))
    yield url


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def print_table(title: str, rows: list[tuple[str, float, str, float | None]]) -> None:
    """rows: (measure, value, unit, ratio against the baseline or None)."""
    print(f"\n{title}")
    print(f"{'measure':<44} {'value':>12} {'unit':<8} {'vs baseline':>11}")
    print("-" * 78)
    for name, value, unit, ratio in rows:
        shown = f"{ratio:>10.2f}x" if ratio is not None else f"{'-':>11}"
        print(f"{name:<44} {value:>12.3f} {unit:<8} {shown}")


def emit(figures: Mapping[str, float | None]) -> None:
    """The bench's last line: one JSON object; None (not measured) becomes null."""
    print(json.dumps({k: None if v is None else round(v, 3) for k, v in figures.items()}))


def bench_turn(i: int, users: int = 100) -> dict[str, str]:
    """The i-th turn of the ingest benches: `users` users, one session each."""
    user = f"user-{i % users}"
    return {
        "agent_id": "bench",
        "user_id": user,
        "session_id": f"{user}-s",
        "role": "user" if i % 2 == 0 else "assistant",
        "content": f"Message {i}: I would like my answers short and in English, please.",
    }


class Analyzer:
    """VACUUM ANALYZE the PostgreSQL database whenever autovacuum would analyze it: once
    50 + 10% of the rows were written since the last time. Deterministic, so timings
    repeat, and needed where the server runs with autovacuum=off (as this machine's
    does): the planner then keeps the statistics of empty tables (recall's term lookup
    took 100x longer), and without vacuum no page is all-visible, so every index-only
    scan of the postings reads the table too, and deleted rows' index entries stay and
    are stepped over by every later scan. A deployment keeps autovacuum on (README)."""

    def __init__(self, url: str) -> None:

        self.engine = create_engine(url, isolation_level="AUTOCOMMIT")
        with self.engine.connect() as conn:
            self.server_setting = str(conn.execute(text("SHOW autovacuum")).scalar())
        self.rows = self.changed = 0

    def wrote(self, rows: int) -> None:

        self.rows += rows
        self.changed += rows
        if self.changed >= 50 + 0.1 * self.rows:
            with self.engine.connect() as conn:
                conn.execute(text("VACUUM ANALYZE"))
            self.changed = 0

    def close(self) -> None:
        self.engine.dispose()


@contextmanager
def served_model(name: str) -> Iterator[str]:
    """The packaged model served in this process, on a free loopback port."""
    from memoryd.llm.local_model import resolve_model
    from memoryd.llm.local_server import ServeOptions, free_port, start

    port = free_port()
    path, served = resolve_model(name)
    server = start(ServeOptions(path, served, port=port))  # serves while referenced
    yield f"http://127.0.0.1:{port}/v1"
    del server
