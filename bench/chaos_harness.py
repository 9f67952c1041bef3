"""The chaos bench's machinery: one scenario's workers and beat over its own servers
(chaos_servers.py), fed the generated chat load (chaos_load.py) through the fake LLM that
makes one fact per user turn, and the exactly-once check.

Every user turn carries a unique tag ("[u3s1t17]"); the LLM answers each tagged turn with
one fact naming the tag. So after a run, "each turn extracted exactly once" is visible
in the store: one active memory per user turn, seen exactly once (a second extraction
of a turn would confirm its memory: evidence 2), and nothing else.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from sqlalchemy import func, select

from bench.chaos_load import TAG, Conversation, chaos_answer, fact_for
from bench.chaos_servers import Servers
from memoryd.client import MemoryClient
from memoryd.models.db import dispose_engines, session_scope
from memoryd.models.migrate import upgrade
from memoryd.models.tables import (
    ExtractionBatch,
    Memory,
    MemoryStatus,
    MemoryTerm,
    Turn,
    TurnStatus,
)
from memoryd.settings import Settings
from memoryd.text import search_tokens
from memoryd.worker.config import QUEUES
from testkit import hosts
from testkit.fakellm import FakeLLM
from testkit.services import purge_queues
from testkit.workers import Proc, start_beat, start_worker


@dataclass
class Outcome:
    scenario: str
    backend: str
    turns: int
    done: int
    duplicated: int
    stranded: int
    dead_lettered: int
    lost: int
    seconds: float
    llm_calls: int = 0
    batches: int = 0
    mismatched_terms: int = 0  # memories whose search terms differ from a fresh derivation
    notes: list[str] = field(default_factory=list)
    settled_at: float = 0.0  # time.monotonic() when the pipeline had settled
    recovery_seconds: float | None = None  # from the scenario's fault to drained
    # What only one scenario looks for, each of which must be 0: workers that exited,
    # errors that reached a caller, memories left without a vector ...
    must_be_zero: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (
            self.duplicated
            or self.stranded
            or self.dead_lettered
            or self.lost
            or self.mismatched_terms
            or any(self.must_be_zero.values())
        )


class Harness:
    """One scenario's world: a fresh database, an empty broker, the fake LLM, workers.
    `backend`: postgres (with Redis), sqlite (with the filesystem broker), rabbitmq
    (PostgreSQL with RabbitMQ), pgbouncer (PostgreSQL through a transaction-pooling
    PgBouncer, with Redis) or hosts (PostgreSQL with Redis, each worker and beat on a
    host of its own, testkit/hosts.py, reaching them over a virtual network)."""

    def __init__(self, backend: str, servers: Servers, **overrides: Any) -> None:
        self.backend = backend
        self.folder = Path(tempfile.mkdtemp(prefix=f"chaos-{backend}-"))
        self.servers = servers
        self.network = servers.network if backend == "hosts" else None
        listen = self.network.gateway if self.network else "127.0.0.1"
        self.llm = FakeLLM(responder=chaos_answer, listen=listen).__enter__()
        # The hosts the next workers go to, in turn (a hosts scenario may set them).
        self.worker_hosts: list[hosts.Host] = []
        self.beat_host: hosts.Host | None = None
        base: dict[str, Any] = {
            "data_dir": self.folder / "data",
            "llm_base_url": self.llm.base_url,
            "llm_api_key": "chaos",
            "batch_size": 20,
            "max_facts": 20,
            "lease_seconds": 5.0,
            "flush_idle_seconds": 2,
            "sweep_interval_seconds": 1.0,
            "llm_timeout_seconds": 2.0,
            "llm_retries": 2,
            "llm_backoff_max_seconds": 1.0,
            "retry_backoff_seconds": 1.0,
            "retry_backoff_max_seconds": 8.0,
            "circuit_open_seconds": 2.0,
            "circuit_open_max_seconds": 8.0,
            "startup_wait_seconds": 60.0,
            "consumer_watchdog_seconds": 10.0,
            "worker_concurrency": 8,
        }
        if backend in ("postgres", "hosts", "pgbouncer"):
            base["database_url"] = servers.new_database()
            base["broker_url"] = servers.redis_url
            redis.Redis.from_url(servers.redis_url).flushdb()
        elif backend == "rabbitmq":  # PostgreSQL with RabbitMQ
            base["database_url"] = servers.new_database()
            base["broker_url"] = servers.amqp_url
            purge_queues(servers.amqp_url)
        self.settings = Settings(**{**base, **overrides})
        upgrade(self.settings)  # on PostgreSQL itself, as README says to migrate
        if backend == "pgbouncer":
            database = self.settings.storage.database_url.rsplit("/", 1)[1]
            self.settings = self.settings.updated(
                **{
                    "database_url": f"{servers.pgbouncer.server_url()}/{database}",
                    "db_transaction_pooler": True,
                }
            )
        self.procs: list[Proc] = []
        self.replaced: set[int] = set()  # pids of exited workers already replaced
        self.hosted: dict[str, hosts.Host] = {}  # worker name -> the host it ran on
        self.stopping = threading.Event()
        self.feeder: threading.Thread | None = None
        self.conversations: list[Conversation] = []
        # Tags of user turns the scenario made fail every time: each must end dead-
        # lettered alone, its fact missing, and every other turn extracted.
        self.poisoned: set[str] = set()
        # Tags of user turns whose fact the model answers unusable (a NUL in it): the
        # turn is extracted, that fact alone left out.
        self.dropped: set[str] = set()
        # Counted by the scenario while it ran; copied to the outcome, each must be 0.
        self.counts: dict[str, int] = {}
        self.notes: list[str] = []
        self.fault_ended_at: float | None = None  # when a *_defaults scenario's fault ended
        self.started = time.monotonic()

    # ----------------------------------------------------------------------- processes

    def start_workers(self, n: int = 2) -> None:
        for _ in range(n):
            self.add_worker()
        self.procs.append(start_beat(self.settings, self.folder, self.beat_host))
        threading.Thread(target=self._supervise, name="chaos-supervisor", daemon=True).start()

    def _supervise(self) -> None:
        """What compose's `restart: unless-stopped` does: a worker that exited (killed,
        or ended by its consumer watchdog) is replaced."""
        while not self.stopping.wait(0.5):
            for proc in self.workers(alive=False):
                if proc.process.pid not in self.replaced:
                    self.replaced.add(proc.process.pid)
                    self.add_worker()

    def add_worker(self, host: hosts.Host | None = None, queues: str = ",".join(QUEUES)) -> Proc:
        """A worker on `host`, else on the next of `worker_hosts` in turn (a replacement
        takes its place's), else on this machine."""
        name = f"w{uuid.uuid4().hex[:6]}"
        if host is None and self.worker_hosts:
            host = self.worker_hosts[len(self.procs) % len(self.worker_hosts)]
        if host is not None:
            self.hosted[name] = host
        proc = start_worker(
            self.settings,
            self.folder,
            name=name,
            concurrency=self.settings.worker.worker_concurrency,
            queues=queues,
            host=host,
        )
        self.procs.append(proc)
        return proc

    def logs_on(self, host: hosts.Host) -> str:
        """What the workers that ran on `host` logged."""
        names = {name for name, on in self.hosted.items() if on is host}
        return "".join(p.log() for p in self.procs if p.log_path.stem in names)

    def workers(self, alive: bool = True) -> list[Proc]:
        return [
            p for p in list(self.procs) if p.alive() == alive and p.log_path.name.startswith("w")
        ]

    def stop(self, keep_logs_in: Path | None = None) -> None:
        """Stop everything; a failed scenario's worker and beat logs are kept."""
        self.stopping.set()
        for proc in self.procs:
            proc.stop()
        self.llm.__exit__()
        for host in self.worker_hosts:
            host.restore()  # a scenario that failed mid-cut leaves the next one whole
        dispose_engines()
        if keep_logs_in is not None:
            shutil.rmtree(keep_logs_in, ignore_errors=True)  # an earlier run's
            keep_logs_in.mkdir(parents=True, exist_ok=True)
            for log in self.folder.glob("*.log"):
                shutil.copy(log, keep_logs_in / log.name)
            if self.backend == "rabbitmq":  # the broker's own account of what it refused
                self.servers.rabbitmq.copy_logs(keep_logs_in / "rabbitmq")
        shutil.rmtree(self.folder, ignore_errors=True)

    # ---------------------------------------------------------------------------- load

    def run(self, convs: list[Conversation], seconds: float, delay: float) -> None:
        """What most scenarios start with: every call `delay` long, workers and beat
        running, the conversations fed over `seconds`."""
        self.llm.delay = delay
        self.start_workers()
        self.feed(convs, seconds)

    def feed(self, conversations: list[Conversation], seconds: float) -> None:
        """Enqueue the conversations spread over `seconds`, ending each, in the background
        (the chat backend keeps talking while faults happen)."""
        self.conversations += conversations
        pause = seconds / max(len(conversations), 1)

        def run() -> None:
            client = MemoryClient(self.settings)
            for conv in conversations:
                keyed = [
                    {**t, "turn_key": f"{conv.session_id}:{i}"} for i, t in enumerate(conv.turns)
                ]
                for start in range(0, len(keyed), 7):  # a few turns per call
                    _until_stored(client.enqueue_turns, keyed[start : start + 7])
                _until_stored(client.end_session, conv.agent_id, conv.user_id, conv.session_id)
                time.sleep(pause)
            client.flush()

        self.feeder = threading.Thread(target=run, name="chaos-feeder", daemon=True)
        self.feeder.start()

    def wait_settled(self, timeout: float) -> bool:
        """Until the feeder is done, every turn of the load is stored, and none is pending
        or claimed."""
        expected = sum(len(c.turns) for c in self.conversations)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            feeding = self.feeder is not None and self.feeder.is_alive()
            if not feeding and self.unsettled(expected) == 0:
                return True
            time.sleep(0.5)
        return False

    def unsettled(self, expected: int) -> int:
        """Turns not yet stored, pending or claimed (-1 while the database is down)."""
        try:
            with session_scope(self.settings.storage, readonly=True) as session:
                counts = dict(
                    session.execute(select(Turn.status, func.count()).group_by(Turn.status)).all()
                )
        except Exception:
            return -1
        busy = counts.get(TurnStatus.PENDING, 0) + counts.get(TurnStatus.CLAIMED, 0)
        return busy + max(expected - sum(counts.values()), 0)

    # --------------------------------------------------------------------------- check

    def check(self, scenario: str) -> Outcome:
        """Exactly once: every turn done by one done batch, every user turn's fact present
        once and seen once, nothing else remembered, nothing left behind."""
        with session_scope(self.settings.storage, readonly=True) as session:
            statuses = dict(
                session.execute(select(Turn.status, func.count()).group_by(Turn.status)).all()
            )
            not_in_done_batch = session.scalar(
                select(func.count())
                .select_from(Turn)
                .outerjoin(ExtractionBatch, ExtractionBatch.id == Turn.batch_id)
                .where(Turn.status == TurnStatus.DONE, ExtractionBatch.status != "done")
            )
            batches = session.scalar(select(func.count()).where(ExtractionBatch.status == "done"))
            memories = session.execute(
                select(Memory.content, Memory.evidence_count).where(
                    Memory.status == MemoryStatus.ACTIVE, Memory.agent_id == "chaos"
                )
            ).all()
            failed = session.scalars(select(Turn.content).where(Turn.status == TurnStatus.FAILED))
            failed_tags = {m.group(1) if (m := TAG.search(c)) else c for c in failed}
        tags = {tag for conv in self.conversations for tag in conv.tags}
        expected = {fact_for(tag) for tag in tags - self.poisoned - self.dropped}
        # Dead letters other than the poisoned turns, and poisoned turns not dead-lettered.
        dead_lettered = len(failed_tags ^ self.poisoned)
        seen: dict[str, int] = {}
        for content, evidence in memories:
            seen[content] = seen.get(content, 0) + evidence
        duplicated = sum(1 for c in expected if seen.get(c, 0) > 1) + int(not_in_done_batch or 0)
        extra = set(seen) - expected
        lost = sum(1 for c in expected if c not in seen)
        total = sum(len(c.turns) for c in self.conversations)
        notes = [f"unexpected memory: {c}" for c in sorted(extra)[:3]]
        if self.poisoned:
            alone = len(failed_tags & self.poisoned)
            notes.append(f"{alone} of {len(self.poisoned)} poisoned turns dead-lettered alone")
        mismatched = self.mismatched_terms()
        if mismatched:
            notes.append(f"{mismatched} memories hold search terms not their own")
        return Outcome(
            scenario=scenario,
            backend=self.backend,
            turns=total,
            done=statuses.get(TurnStatus.DONE, 0),
            duplicated=duplicated + len(extra),
            stranded=statuses.get(TurnStatus.PENDING, 0) + statuses.get(TurnStatus.CLAIMED, 0),
            dead_lettered=dead_lettered,
            lost=lost + max(total - sum(statuses.values()), 0),
            seconds=time.monotonic() - self.started,
            llm_calls=self.llm.calls,
            batches=int(batches or 0),
            mismatched_terms=mismatched,
            notes=notes + self.notes,
            must_be_zero=dict(self.counts),
        )

    def mismatched_terms(self) -> int:
        """Memories whose stored search terms, length or postings differ from what one
        thread derives from their text now: workers tokenize and stem in many threads
        at once, and a shared stemmer once gave memories each other's terms."""
        with session_scope(self.settings.storage, readonly=True) as session:
            memories = session.execute(
                select(
                    Memory.id,
                    Memory.name,
                    Memory.content,
                    Memory.status,
                    Memory.search_text,
                    Memory.search_length,
                )
            ).all()
            postings: dict[int, Counter[str]] = {}
            for memory_id, term, tf in session.execute(
                select(MemoryTerm.memory_id, MemoryTerm.term, MemoryTerm.tf)
            ):
                postings.setdefault(memory_id, Counter())[term] = tf
        wrong = 0
        for m in memories:
            tokens = search_tokens(f"{m.name} {m.content}")
            indexed = Counter(tokens) if m.status == MemoryStatus.ACTIVE else Counter()
            wrong += (
                m.search_text != " ".join(tokens)
                or m.search_length != len(tokens)
                or postings.get(m.id, Counter()) != indexed
            )
        return wrong


def _until_stored(call: Callable[..., object], *args: Any) -> None:
    """What a careful chat backend does while the database is down: retry. Turn keys make
    a retry after an ambiguous failure (committed, but the answer was lost) harmless."""
    while True:
        try:
            call(*args)
            return
        except Exception:
            time.sleep(0.5)


def repeatedly(every: float, times: int, action: Callable[[int], None]) -> threading.Thread:
    """Run `action(i)` every `every` seconds, `times` times, in the background."""

    def run() -> None:
        for i in range(times):
            time.sleep(every)
            action(i)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread
