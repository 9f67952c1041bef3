"""What a recall pays for a scope's vectors once the scope changed: its vectors read
whole (the baseline: a process that holds none of them) against a refresh of the ones it
holds (memoryd/recall/scope_vectors.py: the scope's ids and vector versions listed, the
new vectors read by id). A scope of `--sizes` memories embedded by use-multilingual-int8;
then, `--runs` times, one memory said and embedded and the scope's vectors asked for,
read whole and refreshed in turns, on SQLite and PostgreSQL (when it answers).

    .venv/bin/python bench/vector_refresh.py [--sizes 500,5000] [--runs 20]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the repository, not bench/

from bench.common import bench_database, emit, percentile, postgres_reachable, print_table
from memoryd.memories.proposals import Fact
from memoryd.memories.store import create_memory
from memoryd.models.db import dispose_engines, session_scope, utcnow
from memoryd.models.keys import Scope
from memoryd.models.tables import Actor
from memoryd.recall import backfill, scope_vectors
from memoryd.settings import Settings

SCOPE = Scope("bench", "heavy")


def say(settings: Settings, text: str) -> None:
    with session_scope(settings.storage) as session:
        create_memory(
            session, settings, SCOPE, Fact(content=text, confidence=0.95), utcnow(), actor=Actor.API
        )


def measure(settings: Settings, size: int, runs: int) -> tuple[list[float], list[float]]:
    """(whole reads, refreshes) in milliseconds."""
    for i in range(size):
        say(settings, f"Colleague {i} works from office {i % 40} on {i % 7} days a week")
    while backfill.fill_missing(settings):
        pass
    scope_vectors.STAMP_RECHECK_SECONDS = 0.0  # a large scope checked at each call
    whole: list[float] = []
    refreshed: list[float] = []
    for run in range(2 * runs + 1):
        say(settings, f"Said later, note {run}")
        backfill.fill_missing(settings)
        if run % 2:
            scope_vectors.clear()  # the baseline: nothing held
        with session_scope(settings.storage) as session:
            started = time.perf_counter()
            scope_vectors.scope_vectors(session, settings, SCOPE)
            took = (time.perf_counter() - started) * 1000
        if run:  # the first call filled the cache
            (whole if run % 2 else refreshed).append(took)
    return whole, refreshed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500,5000")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    rows: list[tuple[str, float, str, float | None]] = []
    figures: dict[str, float | None] = {}
    for kind in ("sqlite", "postgres"):
        if kind == "postgres" and (why := postgres_reachable()):
            print(f"{why}: PostgreSQL not measured")
            continue
        for size in map(int, args.sizes.split(",")):
            whole, refreshed = on_database(kind, size, args.runs)
            base, new = percentile(whole, 50), percentile(refreshed, 50)
            rows.append((f"{kind}, {size} memories: read whole, p50", base, "ms", 1.0))
            rows.append((f"{kind}, {size} memories: refreshed, p50", new, "ms", new / base))
            figures[f"{kind}_{size}_whole_ms"] = base
            figures[f"{kind}_{size}_refreshed_ms"] = new
    print_table("a changed scope's vectors: refreshed against read whole", rows)
    emit(figures)


def on_database(kind: str, size: int, runs: int) -> tuple[list[float], list[float]]:
    with (
        tempfile.TemporaryDirectory() as folder,
        bench_database(kind, Path(folder), "vector_refresh") as url,
    ):
        settings = Settings(
            data_dir=Path(folder),
            database_url=url,
            embedding_provider="local",
            embedding_model="use-multilingual-int8",
        )
        try:
            return measure(settings, size, runs)
        finally:
            dispose_engines()


if __name__ == "__main__":
    main()
