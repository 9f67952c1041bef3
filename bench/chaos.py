"""Chaos suite: exactly-once extraction through real faults.

Real worker processes and beat, on PostgreSQL + Redis servers of the bench's own (so it
can kill and restart them), on SQLite + the filesystem broker, and for the broker-crash
scenario on PostgreSQL + a RabbitMQ node of its own (skipped, saying what to install,
where rabbitmq-server is not installed), with the fake OpenAI LLM making one fact per
user turn. Each scenario feeds generated multi-session chats while it injects its
fault, waits for the pipeline to settle, and checks: every turn
done by exactly one done batch, each user turn's fact present once and seen once,
nothing stranded, nothing lost, nothing dead-lettered (every fault here is transient)
but the turns the `poison` scenario makes fail every time, each alone, and every
memory's search terms equal to a fresh single-threaded derivation. Some scenarios check
one thing more (bench/chaos_scenarios.py): no worker exit, no error reaching a caller,
every memory but the refused ones embedded. Baseline: the same load with no fault.

    .venv/bin/python bench/chaos.py            # full size, about 15 minutes
    .venv/bin/python bench/chaos.py --quick    # reduced, as CI runs it
    .venv/bin/python bench/chaos.py --only kill,outage
    .venv/bin/python bench/chaos.py --quick --jobs 3   # three runs at a time

Ends with one JSON line whose keys include lost, duplicated, stranded and
dead_lettered_transient: all must be 0 (the exit status is 1 otherwise).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the repository, not bench/
from sqlalchemy import select

from bench.chaos_harness import Harness, Outcome
from bench.chaos_jobs import Jobs, Run, answer
from bench.chaos_load import generate
from bench.chaos_scenarios import FULL, QUICK, SCENARIOS, Size
from bench.chaos_servers import Servers
from bench.common import emit
from memoryd.client import MemoryClient
from memoryd.models.db import session_scope
from memoryd.models.tables import Memory, MemoryStatus
from testkit.services import ServiceUnavailable

LOGS = Path(tempfile.gettempdir()) / "memoryd-chaos-logs"  # a failed scenario's logs


def settle(h: Harness, size: Size, name: str) -> Outcome:
    if not h.wait_settled(size.settle_seconds):
        print(f"  {name}: not settled after {size.settle_seconds:.0f} s", file=sys.stderr)
    settled_at = time.monotonic()
    outcome = h.check(name)
    outcome.settled_at = settled_at
    return outcome


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
        with session_scope(h.settings.storage, readonly=True) as session:
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
    scenario = SCENARIOS[name]
    convs = generate(size.users, size.sessions, size.turns, seed=zlib.crc32(name.encode()))
    h = Harness(backend, servers, **scenario.overrides)
    outcome = None
    try:
        scenario.run(h, size, convs)
        outcome = settle(h, size, name)
        if scenario.verify is not None:
            scenario.verify(h, outcome)
        outcome.notes += [f"{k} {v}" for k, v in outcome.must_be_zero.items() if v]
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


CONCURRENT = "concurrent_remember"


def planned(only: str) -> list[Run]:
    """Every (scenario, backend) run asked for, in the suite's order."""
    wanted = [n for n in only.split(",") if n] or [*SCENARIOS, CONCURRENT]
    return [
        (name, backend)
        for name in wanted
        for backend in (SCENARIOS[name].backends if name in SCENARIOS else ("postgres", "sqlite"))
    ]


def perform(servers: Servers, run: Run, size: Size) -> Outcome | None:
    """One run on `servers`; None (saying why on stderr) when its backend is not here."""
    name, backend = run
    if not backend_available(servers, backend):
        return None
    started = time.monotonic()
    if name == CONCURRENT:
        outcome = concurrent_remember(servers, backend)
    else:
        outcome = run_scenario(name, backend, size, servers)
    outcome.seconds = time.monotonic() - started
    return outcome


def run_in_turn(runs: list[Run], size: Size) -> tuple[list[Outcome], list[str]]:
    servers = Servers()
    outcomes: list[Outcome] = []
    skipped: list[str] = []
    try:
        for run in runs:
            outcome = perform(servers, run, size)
            if outcome is None:
                skipped.append("_".join(run))
            else:
                outcomes.append(outcome)
                report(outcome)
    finally:
        servers.close()
    return outcomes, skipped


def serve(size: Size, with_hosts: bool) -> None:
    """A job process of `--jobs`: runs each "scenario backend" line of stdin on servers
    of its own and answers each with one JSON line on stdout (bench/chaos_jobs.py)."""
    answers = sys.stdout
    sys.stdout = sys.stderr  # what the scenarios print goes with the logs
    servers = Servers(with_hosts=with_hosts)
    try:
        for line in sys.stdin:
            name, backend = line.split()
            outcome = perform(servers, (name, backend), size)
            answers.write(answer(outcome, skipped=f"{name}_{backend}") + "\n")
            answers.flush()
    finally:
        servers.close()


def report(outcome: Outcome) -> None:
    flag = "ok" if outcome.ok else "FAILED"
    print(
        f"{outcome.scenario:<20} {outcome.backend:<9} {flag:<6} {outcome.seconds:6.1f} s  "
        + "; ".join(outcome.notes),
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="reduced size, as CI runs it")
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    parser.add_argument(
        "--jobs", type=int, default=1, help="runs side by side, each job with its own servers"
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--with-hosts", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    size = QUICK if args.quick else FULL
    if args.serve:
        serve(size, args.with_hosts)
        return
    runs = planned(args.only)
    if args.jobs > 1:
        outcomes, skipped = Jobs(runs, args.quick, report).run(args.jobs)
        order = {run: i for i, run in enumerate(runs)}
        outcomes.sort(key=lambda o: order.get((o.scenario, o.backend), len(order)))
    else:
        outcomes, skipped = run_in_turn(runs, size)
    print_outcomes(outcomes)
    base = next((o for o in outcomes if o.scenario == "baseline"), None)
    totals = {
        "lost": sum(o.lost for o in outcomes),
        "duplicated": sum(o.duplicated for o in outcomes),
        "stranded": sum(o.stranded for o in outcomes),
        "dead_lettered_transient": sum(o.dead_lettered for o in outcomes),
        "search_term_mismatches": sum(o.mismatched_terms for o in outcomes),
        "scenarios": len(outcomes),
        "skipped": len(skipped),  # scenarios on a broker not installed here (named on stderr)
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


def backend_available(servers: Servers, backend: str) -> bool:
    """False, saying why on stderr, when the RabbitMQ node, PgBouncer or the worker hosts
    a backend needs cannot be had here."""
    try:
        if backend == "rabbitmq":
            servers.rabbitmq  # noqa: B018 (started on first use)
        elif backend == "hosts":
            servers.network  # noqa: B018
        elif backend == "pgbouncer":
            servers.pgbouncer  # noqa: B018
    except ServiceUnavailable as exc:
        print(f"  skipped on {backend}: {exc}", file=sys.stderr)
        return False
    return True


def print_outcomes(outcomes: list[Outcome]) -> None:
    base = next((o.seconds for o in outcomes if o.scenario == "baseline"), None)
    print("\nchaos: every turn extracted exactly once?")
    header = (
        f"{'scenario':<20} {'backend':<9} {'turns':>6} {'done':>6} {'duplicated':>10} "
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
