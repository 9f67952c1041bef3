"""Chaos suite: exactly-once extraction through real faults.

Real worker processes and beat, on PostgreSQL + Redis servers of the bench's own (so it
can kill and restart them) and on SQLite + the filesystem broker, with the fake OpenAI
LLM making one fact per user turn. Each scenario feeds generated multi-session chats
while it injects its fault, waits for the pipeline to settle, and checks: every turn
done by exactly one done batch, each user turn's fact present once and seen once,
nothing stranded, nothing lost, nothing dead-lettered (every fault here is transient)
but the turns the `poison` scenario makes fail every time, each alone.
Baseline: the same load with no fault, same run.

    .venv/bin/python bench/chaos.py            # full size, about 15 minutes
    .venv/bin/python bench/chaos.py --quick    # reduced, as CI runs it
    .venv/bin/python bench/chaos.py --only kill,outage

Ends with one JSON line whose keys include lost, duplicated, stranded and
dead_lettered_transient: all must be 0 (the exit status is 1 otherwise).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the repository, not bench/
from sqlalchemy import select

from bench.chaos_harness import (
    Conversation,
    Harness,
    Outcome,
    Servers,
    chaos_answer,
    generate,
    repeatedly,
)
from bench.common import emit
from memoryd.client import MemoryClient
from memoryd.models.db import session_scope
from memoryd.models.tables import Memory, MemoryStatus
from memoryd.settings import Settings
from memoryd.worker import make_celery
from tests import fakellm


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
LOGS = Path(tempfile.gettempdir()) / "memoryd-chaos-logs"  # a failed scenario's logs


def settle(h: Harness, size: Size, name: str) -> Outcome:
    if not h.wait_settled(size.settle_seconds):
        print(f"  {name}: not settled after {size.settle_seconds:.0f} s", file=sys.stderr)
    settled_at = time.monotonic()
    outcome = h.check(name)
    outcome.settled_at = settled_at
    return outcome


# ------------------------------------------------------------------------------ scenarios


def baseline(h: Harness, size: Size, convs: list[Conversation]) -> None:
    h.llm.delay = 0.2
    h.start_workers()
    h.feed(convs, size.feed_seconds)


def kill_workers(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """SIGKILL a worker every few seconds (mid LLM call, mid write); the supervisor starts
    another, as compose would."""
    h.llm.delay = 0.5
    h.start_workers()
    h.feed(convs, size.feed_seconds)

    def kill(_i: int) -> None:
        victims = h.workers()
        if victims:
            random.choice(victims).kill()

    repeatedly(2.0, size.kills, kill).join()


def slow_llm(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """Every call takes 5 s, longer than the lease (3 s), and sessions are longer than one
    batch: heartbeats keep live batches, so no call is made twice."""
    h.llm.delay = 5.0
    h.start_workers()
    h.feed(convs, size.feed_seconds)


def redis_restart(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """Redis dies with every queued message and comes back empty, twice."""
    h.llm.delay = 0.3
    h.start_workers()
    h.feed(convs, size.feed_seconds)
    for _ in range(2):
        time.sleep(size.feed_seconds / 2)
        h.servers.redis.kill()
        time.sleep(1.0)
        h.servers.redis.start()


def postgres_restart(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """PostgreSQL crashes (immediate stop) and restarts mid-run, twice."""
    h.llm.delay = 0.3
    h.start_workers()
    h.feed(convs, size.feed_seconds)
    for _ in range(2):
        time.sleep(size.feed_seconds / 2)
        h.servers.postgres.restart("immediate")


def llm_faults(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """20% 429 with Retry-After, 10% 500, 5% malformed JSON, 5% hang past the timeout."""
    rng = random.Random(3)
    lock = threading.Lock()

    def choose() -> fakellm.Action | None:
        with lock:
            roll = rng.random()
        if roll < 0.20:
            return fakellm.rate_limited(retry_after=1)
        if roll < 0.30:
            return fakellm.server_error(500)
        if roll < 0.35:
            return fakellm.malformed()
        if roll < 0.40:
            return fakellm.slow(h.settings.llm_timeout_seconds + 1)
        return None

    h.llm.delay = 0.2
    h.llm.chooser = choose
    h.start_workers()
    h.feed(convs, size.feed_seconds)


def outage(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """The LLM endpoint answers nothing but 503 for a long while, then comes back."""
    h.llm.delay = 0.2
    h.start_workers()
    h.feed(convs, size.feed_seconds)
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
    h.llm.delay = 2.0
    h.start_workers()
    h.feed(convs[: size.sessions], size.feed_seconds)
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
    h.llm.delay = 0.2
    h.start_workers()
    h.feed(convs[: size.sessions], size.feed_seconds)
    time.sleep(1.0)
    h.llm.down = True
    time.sleep(size.outage_seconds)
    h.llm.down = False
    h.fault_ended_at = time.monotonic()


POISON = "[poison]"


def poison(h: Harness, size: Size, convs: list[Conversation]) -> None:
    """One user turn in each of the first user's sessions makes the model fail every
    time (invalid JSON, and again after the repair round: a permanent error). Its batch
    is split until it stands alone; it alone is dead-lettered, every other turn extracted."""
    for conv in convs[: size.sessions]:
        turn = conv.turns[10]  # a user turn, within the first batch
        h.poisoned.add(conv.tags[5])
        turn["content"] = f"{turn['content'][:12]} {POISON}{turn['content'][12:]}"

    def refuse_poison(messages: list[dict[str, Any]]) -> str:
        if any(POISON in str(m.get("content")) for m in messages):
            return "I cannot answer that."
        return chaos_answer(messages)

    h.llm.delay = 0.2
    h.llm.responder = refuse_poison
    h.start_workers()
    h.feed(convs, size.feed_seconds)


# What the *_defaults scenarios run with as shipped: every setting recovery depends on.
DEFAULT_RECOVERY = {
    name: Settings.model_fields[name].default
    for name in (
        "lease_seconds",
        "sweep_interval_seconds",
        "flush_idle_seconds",
        "retry_backoff_seconds",
        "retry_backoff_max_seconds",
        "circuit_open_seconds",
        "circuit_open_max_seconds",
        "llm_retries",
        "llm_backoff_max_seconds",
    )
}

SCENARIOS: dict[str, tuple[Run, tuple[str, ...], dict[str, float]]] = {
    "baseline": (baseline, ("postgres",), {}),
    "kill": (kill_workers, ("postgres", "sqlite"), {}),
    "slow_llm": (
        slow_llm,
        ("postgres", "sqlite"),
        {"lease_seconds": 3.0, "llm_timeout_seconds": 30.0},
    ),
    "redis_restart": (redis_restart, ("postgres",), {}),
    "postgres_restart": (postgres_restart, ("postgres",), {}),
    "llm_faults": (llm_faults, ("postgres",), {}),
    "outage": (outage, ("postgres", "sqlite"), {}),
    "duplicate_ingest": (duplicate_ingest, ("postgres", "sqlite"), {}),
    "poison": (poison, ("postgres", "sqlite"), {}),
    "kill_defaults": (kill_with_defaults, ("postgres",), DEFAULT_RECOVERY),
    "outage_defaults": (outage_with_defaults, ("postgres",), DEFAULT_RECOVERY),
}


def concurrent_remember(servers: Servers, backend: str) -> Outcome:
    """20 concurrent remember() of one fact; remember() racing an extraction of another."""
    h = Harness(backend, servers)
    try:
        h.start_workers()
        client = MemoryClient(h.settings)
        barrier = threading.Barrier(30)

        def save(content: str, name: str = "") -> None:
            barrier.wait()
            client.remember("chaos", "ann", content, name=name)

        def chat() -> None:
            barrier.wait()
            for i in range(5):
                client.enqueue_turn(
                    agent_id="chaos",
                    user_id="ann",
                    session_id=f"r{i}",
                    role="user",
                    content="Call me Sam.",
                )
                client.end_session("chaos", "ann", f"r{i}")

        jobs = [threading.Thread(target=save, args=("Allergic to peanuts",)) for _ in range(20)]
        jobs += [
            threading.Thread(target=save, args=("Wants to be called Sam", "preferred name"))
            for _ in range(9)
        ]
        jobs.append(threading.Thread(target=chat))
        for job in jobs:
            job.start()
        for job in jobs:
            job.join()
        h.wait_settled(60)
        with session_scope(h.settings, readonly=True) as session:
            rows = session.execute(
                select(Memory.content, Memory.evidence_count).where(
                    Memory.status == MemoryStatus.ACTIVE
                )
            ).all()
        got = sorted((c, e) for c, e in rows)
        want = [("Allergic to peanuts", 20), ("Wants to be called Sam", 14)]
        lost = 0 if got == want else max(1, len(want) - len(got))
        outcome = Outcome(
            "concurrent_remember", backend, 34, 34, len(got) - len(want), 0, 0, lost, 0.0
        )
        if got != want:
            outcome.notes.append(f"memories {got}, expected {want}")
        return outcome
    finally:
        h.stop()


def run_scenario(name: str, backend: str, size: Size, servers: Servers) -> Outcome:
    run, _backends, overrides = SCENARIOS[name]
    convs = generate(size.users, size.sessions, size.turns, seed=zlib.crc32(name.encode()))
    h = Harness(backend, servers, **overrides)
    outcome = None
    try:
        run(h, size, convs)
        outcome = settle(h, size, name)
        if h.fault_ended_at is not None:
            outcome.recovery_seconds = outcome.settled_at - h.fault_ended_at
            outcome.notes.append(f"{outcome.recovery_seconds:.1f} s from the fault to drained")
        if name == "slow_llm" and outcome.llm_calls != outcome.batches:
            # Each call outlives the lease: one taken over would be called twice.
            outcome.duplicated += outcome.llm_calls - outcome.batches
            outcome.notes.append(f"{outcome.llm_calls} LLM calls for {outcome.batches} batches")
        return outcome
    finally:
        logs = LOGS / f"{name}-{backend}" if outcome is None or not outcome.ok else None
        if logs is not None:
            print(f"  logs of {name} on {backend} kept in {logs}", file=sys.stderr)
        h.stop(keep_logs_in=logs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="reduced size, as CI runs it")
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    args = parser.parse_args()
    size = QUICK if args.quick else FULL
    wanted = [n for n in args.only.split(",") if n] or [*SCENARIOS, "concurrent_remember"]
    servers = Servers()
    outcomes: list[Outcome] = []
    try:
        for name in wanted:
            backends = SCENARIOS[name][1] if name in SCENARIOS else ("postgres", "sqlite")
            for backend in backends:
                started = time.monotonic()
                if name == "concurrent_remember":
                    outcome = concurrent_remember(servers, backend)
                else:
                    outcome = run_scenario(name, backend, size, servers)
                outcome.seconds = time.monotonic() - started
                outcomes.append(outcome)
                flag = "ok" if outcome.ok else "FAILED"
                print(
                    f"{name:<20} {backend:<9} {flag:<6} {outcome.seconds:6.1f} s  "
                    + "; ".join(outcome.notes),
                    flush=True,
                )
    finally:
        servers.close()
    print_outcomes(outcomes)
    base = next((o for o in outcomes if o.scenario == "baseline"), None)
    totals = {
        "lost": sum(o.lost for o in outcomes),
        "duplicated": sum(o.duplicated for o in outcomes),
        "stranded": sum(o.stranded for o in outcomes),
        "dead_lettered_transient": sum(o.dead_lettered for o in outcomes),
        "search_term_mismatches": sum(o.mismatched_terms for o in outcomes),
        "scenarios": len(outcomes),
        "failed_scenarios": sum(not o.ok for o in outcomes),
        "turns": sum(o.turns for o in outcomes),
        "baseline_seconds": base.seconds if base else 0.0,
        **{f"{o.scenario}_{o.backend}_seconds": o.seconds for o in outcomes},
        **{
            f"{o.scenario}_{o.backend}_recovery_seconds": o.recovery_seconds
            for o in outcomes
            if o.recovery_seconds is not None
        },
    }
    emit(totals)
    sys.exit(0 if not totals["failed_scenarios"] else 1)


def print_outcomes(outcomes: list[Outcome]) -> None:
    base = next((o.seconds for o in outcomes if o.scenario == "baseline"), None)
    print("\nchaos: every turn extracted exactly once?")
    header = (
        f"{'scenario':<20} {'db':<9} {'turns':>6} {'done':>6} {'duplicated':>10} "
        f"{'stranded':>8} {'dead-lettered':>13} {'lost':>5} {'seconds':>8} {'vs base':>8}"
    )
    print(header)
    print("-" * len(header))
    for o in outcomes:
        ratio = f"{o.seconds / base:>7.2f}x" if base else f"{'-':>8}"
        print(
            f"{o.scenario:<20} {o.backend:<9} {o.turns:>6} {o.done:>6} {o.duplicated:>10} "
            f"{o.stranded:>8} {o.dead_lettered:>13} {o.lost:>5} {o.seconds:>8.1f} {ratio}"
        )


if __name__ == "__main__":
    main()
