"""/metrics in the Prometheus text format, every name prefixed `memoryd_`.

Two sources: counters of what this server handled (turns it ingested or rejected,
recall latency), kept in process (across `--workers` through prometheus-client's
multiprocess mode), and figures read from the database at scrape time (batches, LLM
calls and tokens, dead letters, the backlog), which cover every worker of the
deployment because every worker records its work there.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from memoryd.models.db import session_scope, utcnow
from memoryd.models.schemas import IngestResult
from memoryd.monitoring import MULTIPROC_ENV
from memoryd.monitoring.figures import PipelineFigures, pipeline_figures
from memoryd.recall.rerank import RERANK_FAILURES
from memoryd.settings import Settings

DB_CACHE_SECONDS = 5.0  # scrapes closer together than this share one set of queries

TURNS_INGESTED = Counter("memoryd_turns_ingested", "Turns stored through this server")
TURNS_DUPLICATE = Counter(
    "memoryd_turns_duplicate", "Turns skipped as repeated turn_keys through this server"
)
TURNS_REJECTED = Counter(
    "memoryd_turns_rejected", "Turns refused by validation, by the first bad field", ["field"]
)
RECALL_SECONDS = Histogram(
    "memoryd_recall_seconds",
    "Latency of recall and context calls through this server",
    ["kind"],
    buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)

# Every kind is exported, zero or not, so a series exists before its first batch.
BATCH_KINDS = ("extract", "compress")
KNOWN_FIELDS = {"agent_id", "user_id", "session_id", "role", "content", "turn_key", "timestamp"}


def count_ingest(result: IngestResult) -> None:
    TURNS_INGESTED.inc(result.accepted)
    TURNS_DUPLICATE.inc(result.duplicates)
    for item in result.rejected:
        field = str(item["errors"][0]["field"]) if item["errors"] else ""
        field = field.split(".")[0]
        # Label values stay a small fixed set, whatever a caller sends.
        TURNS_REJECTED.labels(field if field in KNOWN_FIELDS | {"metadata"} else "other").inc()


class DatabaseCollector(Collector):
    """The deployment's figures, read at scrape time (at most every DB_CACHE_SECONDS)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._cached: tuple[float, PipelineFigures] | None = None

    def _figures(self) -> PipelineFigures:
        with self._lock:
            if self._cached is None or time.monotonic() - self._cached[0] > DB_CACHE_SECONDS:
                with session_scope(self.settings.storage, readonly=True) as session:
                    self._cached = (time.monotonic(), pipeline_figures(session, utcnow()))
            return self._cached[1]

    def collect(self) -> Iterator[Metric]:
        f = self._figures()
        batches = CounterMetricFamily(
            "memoryd_batches",
            "Batches by kind (extract, compress) and outcome",
            labels=["kind", "status"],
        )
        calls = CounterMetricFamily("memoryd_llm_calls", "LLM calls by kind", labels=["kind"])
        tokens = CounterMetricFamily(
            "memoryd_llm_tokens", "LLM tokens by kind", labels=["kind", "direction"]
        )
        for kind in BATCH_KINDS:
            for status in ("done", "failed", "abandoned", "running"):
                batches.add_metric([kind, status], f.batches.get(kind, {}).get(status, 0))
            calls.add_metric([kind], f.llm_calls.get(kind, 0))
            tokens.add_metric([kind, "in"], f.tokens_in.get(kind, 0))
            tokens.add_metric([kind, "out"], f.tokens_out.get(kind, 0))
        yield from (batches, calls, tokens)
        yield GaugeMetricFamily(
            "memoryd_dead_letter_turns", "Dead-lettered turns (memoryd retry)", value=f.dead_letters
        )
        yield GaugeMetricFamily(
            "memoryd_pending_turns", "Turns waiting for or in extraction", value=f.pending_turns
        )
        yield GaugeMetricFamily(
            "memoryd_oldest_pending_turn_age_seconds",
            "Seconds the oldest pending turn has waited since received (0 when none waits)",
            value=f.oldest_pending_seconds,
        )


def metrics_registry(settings: Settings) -> CollectorRegistry:
    """The registry /metrics renders: in-process counters (merged over worker processes
    in multiprocess mode) plus the database figures."""
    registry = CollectorRegistry()
    if os.environ.get(MULTIPROC_ENV):
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        for collector in (TURNS_INGESTED, TURNS_DUPLICATE, TURNS_REJECTED, RECALL_SECONDS):
            registry.register(collector)
        registry.register(RERANK_FAILURES)
    registry.register(DatabaseCollector(settings))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
