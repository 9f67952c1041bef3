"""The chaos suite's scenarios: each feeds generated chats while it injects one fault.

`bench/chaos.py` runs them and checks the outcome (docs there)."""

from __future__ import annotations

import dataclasses
import random
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.chaos_answers import (
    CHAOS_EMBEDDINGS,
    embedding_refusal,
    every_other_memory_embedded,
    facts_counted_invalid,
    llm_faults,
    nul_in_a_fact,
    poison,
)
from bench.chaos_harness import Harness, Outcome, repeatedly
from bench.chaos_load import Conversation
from memoryd.client import MemoryClient
from memoryd.settings import FIELDS as SETTING_FIELDS
from memoryd.worker import make_celery
from memoryd.worker.config import EXTRACTION_QUEUE
from testkit import hosts
from testkit.workers import start_beat


@dataclass(frozen=True)
class Size:
    users: int
    sessions: int
    turns: int
    feed_seconds: float
    kills: int
    outage_seconds: float
    settle_seconds: float


FULL = Size(
    users=10,
    sessions=5,
    turns=60,
    feed_seconds=20,
    kills=10,
    outage_seconds=120,
    settle_seconds=600,
)
QUICK = Size(
    users=3, sessions=2, turns=44, feed_seconds=4, kills=4, outage_seconds=12, settle_seconds=240
)

Run = Callable[[Harness, Size, list[Conversation]], None]

# ------------------------------------------------------------------------------ scenarios


def baseline(h: Harness, size: Size, convs: list[Conversation]) -> None:
    h.run(convs=convs, seconds=size.feed_seconds, delay=0.2)


def kill_workers(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """SIGKILL a worker every few seconds (mid LLM call, mid write); the supervisor starts
    another, as compose would."""
    h.run(convs=convs, seconds=size.feed_seconds, delay=0.5)

    def kill(_i: int) -> None:
        victims = h.workers()
        if victims:
            random.choice(victims).kill()

    repeatedly(2.0, size.kills, kill).join()


# Calls longer than the lease, so that only renewals keep a batch. A renewal every third
# of the lease leaves two thirds for one to get through: 4 s here. With a 3 s lease, on a
# 2-core machine running three chaos jobs beside the rest of the suite (everything about
# 3x slower), a renewal on SQLite once came later than the 2 s it left: one live batch
# was taken over and called twice (its result was written once).
SLOW_CALL_MARGINS = {"lease_seconds": 6.0, "llm_timeout_seconds": 30.0}
SLOW_CALL_SECONDS = 8.0


def slow_llm(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """Every call takes 8 s, longer than the lease (6 s), and sessions are longer than one
    batch: heartbeats keep live batches, so no call is made twice."""
    h.run(convs=convs, seconds=size.feed_seconds, delay=SLOW_CALL_SECONDS)


def redis_restart(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """Redis dies with every queued message and comes back empty, twice."""
    _broker_dies_twice(h, size, convs, h.servers.redis)


def rabbitmq_restart(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """RabbitMQ crashes (SIGKILL of the node) and comes back, twice. Unlike Redis it keeps
    what its quorum queues held; what workers had taken and not yet acknowledged is
    delivered again, and every publish in the gap fails (the sweep sends it anew)."""
    _broker_dies_twice(h, size, convs, h.servers.rabbitmq)


def _broker_dies_twice(h: Harness, size: Size, convs: list[Conversation], broker: Any) -> None:
    h.run(convs=convs, seconds=size.feed_seconds, delay=0.3)
    for _ in range(2):
        time.sleep(size.feed_seconds / 2)
        broker.kill()
        time.sleep(1.0)
        broker.start()


def postgres_restart(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """PostgreSQL crashes (immediate stop) and restarts mid-run, twice."""
    h.run(convs=convs, seconds=size.feed_seconds, delay=0.3)
    for _ in range(2):
        time.sleep(size.feed_seconds / 2)
        h.servers.postgres.restart("immediate")


def outage(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """The LLM endpoint answers nothing but 503 for a long while, then comes back."""
    h.run(convs=convs, seconds=size.feed_seconds, delay=0.2)
    time.sleep(1.0)
    h.llm.down = True
    time.sleep(size.outage_seconds)
    h.llm.down = False


def duplicate_ingest(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """Every `memoryd.ingest_turns` message delivered twice (same task id), turns without
    keys: what acks_late does after a worker died mid-task."""
    h.llm.delay = 0.2
    h.conversations += convs
    app = make_celery(h.settings)
    for conv in convs:
        for start in range(0, len(conv.turns), 10):
            task_id = uuid.uuid4().hex
            for _ in range(2):
                app.send_task(
                    "memoryd.ingest_turns",
                    args=[{"turns": conv.turns[start : start + 10]}],
                    task_id=task_id,
                    queue="extraction",
                )
    h.start_workers()  # the sessions idle out; the sweep extracts them


def kill_with_defaults(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """With the default lease and sweep interval: every worker SIGKILLed once, mid-call.
    Reports the seconds from the kill until every turn is extracted (target 60)."""
    h.run(convs=convs[: size.sessions], seconds=size.feed_seconds, delay=2.0)
    deadline = time.monotonic() + 60
    while h.llm.calls == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # the calls are under way
    for worker in h.workers():
        worker.kill()
    h.fault_ended_at = time.monotonic()


def outage_with_defaults(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """With the default circuit, back-off, lease and sweep: the LLM endpoint answers only
    503 for a while. Reports the seconds from its return until every turn is extracted
    (target 30)."""
    h.run(convs=convs[: size.sessions], seconds=size.feed_seconds, delay=0.2)
    time.sleep(1.0)
    h.llm.down = True
    time.sleep(size.outage_seconds)
    h.llm.down = False
    h.fault_ended_at = time.monotonic()


# What the *_defaults scenarios run with as shipped: every setting recovery depends on.
DEFAULT_RECOVERY = {
    name: SETTING_FIELDS[name].default
    for name in (
        "lease_seconds",
        "sweep_interval_seconds",
        "flush_idle_seconds",
        "retry_backoff_seconds",
        "retry_backoff_max_seconds",
        "circuit_open_seconds",
        "circuit_open_max_seconds",
        "llm_retries",
        "llm_timeout_seconds",  # not the bench's 2 s: kill_defaults' calls take 2 s
        "llm_backoff_max_seconds",
    )
}


def busy_workers(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """Every slot of every worker busy with LLM calls three times longer than the
    consumer watchdog's interval: no worker may take itself for a dead consumer."""
    h.run(convs=convs[: size.sessions], seconds=size.feed_seconds, delay=6.0)


def no_worker_exited(h: Harness, outcome: Outcome) -> None:
    outcome.must_be_zero["worker_exits"] = len(h.replaced)


def recall_during_extraction(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """Callers recall and build context blocks for the users being extracted, without a
    pause, while workers write their facts: recall's feedback writes (access counts,
    reinforcement, usage rows) meet extraction's writes on the same memories. No error
    may reach a caller."""
    h.run(convs=convs, seconds=size.feed_seconds, delay=0.1)
    users = sorted({c.user_id for c in convs})
    until = time.monotonic() + size.feed_seconds + 5
    errors: list[str] = []

    def ask(i: int) -> None:
        client, rng = MemoryClient(h.settings), random.Random(i)
        while time.monotonic() < until:
            user = rng.choice(users)
            try:
                if i % 2:
                    client.recall("chaos fact about the trip", "chaos", user, k=10)
                else:
                    client.build_context("what did we talk about", "chaos", user)
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}"[:200])

    callers = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    h.counts["caller_errors"] = len(errors)
    h.notes += [f"{len(errors)} recall errors", *errors[:3]]


LATE_WRITE_REFUSED = re.compile(r"batch \d+: (lease lost|its turns are no longer claimed)")


class Partition:
    """Two worker hosts; one loses its network for three leases just after its worker
    sent an LLM call. The lease runs out on the database's clock, the sweep gives
    the turns to the other host, which extracts them; when the link comes back, the
    first host's call returns and its write must be refused. `run` remembers the host it
    cut for `late_write_refused`, the check that follows it (runs are one at a time)."""

    def __init__(self) -> None:
        self.cut_off: hosts.Host | None = None

    def run(self, h: Harness, size: Size, convs: list[Conversation]) -> None:
        self.cut_off = None  # not an earlier run's
        h.worker_hosts = h.servers.hosts(2)
        # Calls of 3 s, and the cut right after a call of the host arrives: it lands while
        # that call is in flight even on a loaded machine (a 1 s call could end first).
        # The host cut is the one whose call arrives next: on a loaded machine one host's
        # worker may start late and the other take every session.
        h.run(convs=convs, seconds=size.feed_seconds, delay=3.0)
        calls = len(h.llm.senders)
        deadline = time.monotonic() + 60
        while len(h.llm.senders) == calls and time.monotonic() < deadline:
            time.sleep(0.02)
        sender = h.llm.senders[-1] if h.llm.senders else ""
        cut_off = next((x for x in h.worker_hosts if x.address == sender), h.worker_hosts[0])
        cut_off.cut()
        time.sleep(3 * h.settings.extraction.lease_seconds)
        cut_off.restore()
        self.cut_off = cut_off

    def late_write_refused(self, h: Harness, outcome: Outcome) -> None:
        """Waits (at most two minutes) for a late write to be refused: the cut-off host's
        call returns only at TCP's next retransmission, after the other host took over.
        When the cut comes while the cut-off host holds a row lock in an open
        transaction, the other host's batch waits on that lock past its lease and is
        the one refused, so every host's log counts."""
        deadline = time.monotonic() + 120
        hosts_seen = h.worker_hosts if self.cut_off else []
        while True:
            refused = sum(len(LATE_WRITE_REFUSED.findall(h.logs_on(x))) for x in hosts_seen)
            if refused or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        outcome.notes.append(f"{refused} late writes refused after the cut")
        outcome.must_be_zero["late_write_not_refused"] = int(refused == 0)


partition = Partition()


AHEAD = {"clock_ahead_minutes": 10}


def clock_ahead(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """Beat and one of two worker hosts run ten minutes ahead; that host's worker alone
    takes the maintenance queue, so every sweep (which takes back expired leases) runs
    on the fast clock. If any lease were judged by a host's clock, the other host's
    live batches would look expired to it and be taken over, their LLM calls made
    twice. Calls outlive the lease, so only renewals keep batches."""
    first, second, third = h.servers.hosts(3)
    fast = dataclasses.replace(first, **AHEAD)
    h.llm.delay = SLOW_CALL_SECONDS
    h.add_worker(fast)
    h.add_worker(second, queues=EXTRACTION_QUEUE)
    h.procs.append(start_beat(h.settings, h.folder, dataclasses.replace(third, **AHEAD)))
    h.feed(convs, size.feed_seconds)


def each_batch_called_once(h: Harness, outcome: Outcome) -> None:
    outcome.notes.append(f"{outcome.llm_calls} LLM calls for {outcome.batches} batches")
    outcome.must_be_zero["calls_made_twice"] = max(outcome.llm_calls - outcome.batches, 0)


@dataclass(frozen=True)
class Scenario:
    run: Run
    backends: tuple[str, ...] = ("postgres",)
    overrides: dict[str, Any] = field(default_factory=dict)
    # After the pipeline settled: what only this scenario checks, on its outcome.
    verify: Callable[[Harness, Outcome], None] | None = None
    # About how long a quick run takes here: runs side by side (--jobs) start longest
    # first, so that none of the long ones is left to end the suite alone.
    seconds: float = 10.0


BOTH = ("postgres", "sqlite")
SCENARIOS: dict[str, Scenario] = {
    "baseline": Scenario(baseline),
    "kill": Scenario(kill_workers, (*BOTH, "pgbouncer"), seconds=13),
    "slow_llm": Scenario(slow_llm, BOTH, SLOW_CALL_MARGINS, seconds=30),
    "redis_restart": Scenario(redis_restart),
    "rabbitmq_restart": Scenario(rabbitmq_restart, ("rabbitmq",), seconds=30),
    "postgres_restart": Scenario(postgres_restart, seconds=14),
    "llm_faults": Scenario(llm_faults),
    "outage": Scenario(outage, BOTH, seconds=24),
    "duplicate_ingest": Scenario(duplicate_ingest, BOTH, seconds=12),
    "poison": Scenario(poison, BOTH, seconds=15),
    "nul_fact": Scenario(nul_in_a_fact, BOTH, verify=facts_counted_invalid),
    "busy_workers": Scenario(
        busy_workers,
        overrides={
            "consumer_watchdog_seconds": 2.0,
            "worker_concurrency": 1,
            "llm_timeout_seconds": 30.0,
        },
        verify=no_worker_exited,
        seconds=24,
    ),
    "recall_during_extraction": Scenario(recall_during_extraction, BOTH, seconds=13),
    "embedding_refusal": Scenario(
        embedding_refusal, overrides=CHAOS_EMBEDDINGS, verify=every_other_memory_embedded
    ),
    "partition": Scenario(
        partition.run,
        ("hosts",),
        # The call waits out the cut (its answer comes when the link does), and the
        # cut-off worker is not ended by its consumer watchdog first.
        {"llm_timeout_seconds": 60.0, "consumer_watchdog_seconds": 120.0},
        verify=partition.late_write_refused,
        seconds=34,
    ),
    "clock_ahead": Scenario(
        clock_ahead,
        ("hosts",),
        SLOW_CALL_MARGINS,
        verify=each_batch_called_once,
        seconds=28,
    ),
    "kill_defaults": Scenario(kill_with_defaults, overrides=DEFAULT_RECOVERY, seconds=43),
    "outage_defaults": Scenario(outage_with_defaults, overrides=DEFAULT_RECOVERY, seconds=36),
}
