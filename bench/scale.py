"""Scaling bench: extraction throughput on 1, 2 and 4 worker hosts, nothing lost or twice.

Each worker host is a network namespace of its own (testkit/hosts.py) running one
`memoryd worker --pool=threads -c 4`; PostgreSQL, Redis, beat and the fake LLM, which
answers every call after 2 s, stay on this machine and are reached over a virtual
network. The load is the chaos bench's generated chats (bench/chaos_load.py): 64
sessions of 60 turns, fed from one thread once every worker is ready, each session
ended as it is fed. A session's batches run one after another and each waits 2 s on
the LLM, so a host extracts at most 4 batches per 2 s, and N hosts should extract N
times as fast; at 4 hosts there are still four sessions per slot.

msg/s is the turns extracted divided by the time from the first batch claimed to the
last one's write (the batches' own timestamps): worker start-up and the settle poll
are not in it. Each run then makes the chaos bench's exactly-once check (one fact per
user turn, none lost, none twice, nothing stranded or dead-lettered) and counts LLM
calls beyond one per batch. The second pass is the same through a transaction-pooling
PgBouncer with 8 server connections (MEMORYD_DB_TRANSACTION_POOLER on every process).
Recovery settings are the shipped ones (20 s lease, 15 s sweep): no fault here.

The hosts share this machine's CPU, unlike real ones: the table says how much of it
the bench's processes used and how busy the machine was, so a run held back by the
CPU shows as one.

    .venv/bin/python bench/scale.py                      # 1, 2, 4 hosts, then via PgBouncer
    .venv/bin/python bench/scale.py --quick --hosts 1 2 --no-pgbouncer

Needs root and iproute2 (network namespaces) and, for the second pass, Debian's
pgbouncer; says so and skips what it cannot run. Ends with one JSON line; the exit
status is 1 when a run lost, duplicated or stranded anything.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the repository, not bench/
from sqlalchemy import select
from sqlalchemy.engine import make_url

from bench.chaos_harness import Harness
from bench.chaos_load import generate
from bench.chaos_scenarios import each_batch_called_once
from bench.chaos_servers import Servers
from bench.common import emit
from bench.scale_report import figures, print_runs
from bench.scale_runs import LLM_SECONDS, Run, Size, Span
from bench.usage import (
    ConnectionPeak,
    CpuUse,
    own_seconds,
    process_seconds,
    summed,
    tree_seconds,
)
from memoryd.models.db import dispose_engines, session_scope
from memoryd.models.tables import BatchStatus, ExtractionBatch
from memoryd.settings import FIELDS as SETTING_FIELDS
from memoryd.settings import Settings
from testkit import hosts
from testkit.services import PgBouncer, ServiceUnavailable

LOGS = Path(tempfile.gettempdir()) / "memoryd-scale-logs"  # a failed run's worker logs
POOLER_CONNECTIONS = 8  # PgBouncer's server connections: a quarter of 4 hosts' slots
SETTINGS = {
    "llm_timeout_seconds": 30.0,  # above the 2 s calls (the chaos harness sets 2 s)
    "lease_seconds": SETTING_FIELDS["lease_seconds"].default,
    "sweep_interval_seconds": SETTING_FIELDS["sweep_interval_seconds"].default,
}


FULL = Size(users=16, sessions=4, turns=60, settle_seconds=600)
QUICK = Size(users=8, sessions=2, turns=40, settle_seconds=180)
# On the concurrency: the hosts share this machine's two cores, and a batch of this load
# costs about 0.17 s of CPU (its worker and PostgreSQL): 4 hosts of 4 slots with 2 s
# calls need about 1.3 cores at full speed; of 8 slots, more than the machine has.


def through(bouncer: PgBouncer, settings: Settings) -> Settings:
    """`settings`' database reached through the pooler, told so. The harness migrated
    it directly, as README asks."""
    database = make_url(settings.storage.resolved_database_url).database
    url = f"{bouncer.server_url()}/{database}"
    return settings.updated(**{"database_url": url, "db_transaction_pooler": True})


def wait_ready(h: Harness, count: int, timeout: float = 120.0) -> None:
    """Until `count` workers said they are ready: the load starts on all hosts at once."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(" ready." in p.log() for p in h.workers()) >= count:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{count} workers not ready within {timeout:.0f} s")


def batch_spans(settings: Settings) -> tuple[int, list[Span]]:
    """Turns done, and the done batches' spans, oldest batch first."""
    with session_scope(settings.storage, readonly=True) as session:
        rows = session.execute(
            select(
                ExtractionBatch.session_id,
                ExtractionBatch.turn_count,
                ExtractionBatch.started_at,
                ExtractionBatch.finished_at,
            )
            .where(ExtractionBatch.status == BatchStatus.DONE, ExtractionBatch.kind == "extract")
            .order_by(ExtractionBatch.id)
        ).all()
    if not rows:
        return 0, []
    first = min(r.started_at for r in rows)
    spans = [
        Span(
            r.session_id,
            (r.started_at - first).total_seconds(),
            (r.finished_at - first).total_seconds(),
        )
        for r in rows
    ]
    return sum(r.turn_count for r in rows), spans


def measure(servers: Servers, count: int, size: Size, bouncer: PgBouncer | None) -> Run:
    """One run: `count` hosts, one worker each, the whole load, then the check."""
    convs = generate(size.users, size.sessions, size.turns)
    h = Harness("hosts", servers, worker_concurrency=size.concurrency, **SETTINGS)
    outcome = None
    connections = ConnectionPeak(h.settings.storage.resolved_database_url)  # PostgreSQL's, directly
    try:
        if bouncer is not None:
            h.settings = through(bouncer, h.settings)
        h.llm.delay = LLM_SECONDS
        h.worker_hosts = servers.hosts(count)
        h.start_workers(count)
        wait_ready(h, count)
        cpu, started = cpu_parts(h, bouncer).start(), time.monotonic()
        connections.start()
        h.feed(convs, seconds=0)
        assert h.feeder is not None
        h.feeder.join()
        fed = time.monotonic() - started
        if not h.wait_settled(size.settle_seconds):
            print(f"  {count} hosts: not settled in {size.settle_seconds:.0f} s", file=sys.stderr)
        cpu.stop()
        peak = connections.stop()
        waited = pool_wait(bouncer, h.settings)
        outcome = h.check(f"{count} hosts")
        each_batch_called_once(h, outcome)
        turns, spans = batch_spans(h.settings)
        slots = count * size.concurrency
        return Run(count, slots, bouncer is not None, outcome, turns, spans, fed, cpu, waited, peak)
    finally:
        connections.stop()
        kept = None
        if outcome is None or not outcome.ok:
            kept = LOGS / f"{count}-hosts{'-pgbouncer' if bouncer else ''}"
            print(f"  logs kept in {kept}", file=sys.stderr)
        h.stop(keep_logs_in=kept)
        dispose_engines()


def pool_wait(bouncer: PgBouncer | None, settings: Settings) -> float | None:
    """Seconds the run's clients waited for one of PgBouncer's server connections."""
    if bouncer is None:
        return None
    database = make_url(settings.storage.resolved_database_url).database or ""
    return bouncer.stats(database).get("total_wait_time", 0) / 1e6


def cpu_parts(h: Harness, bouncer: PgBouncer | None) -> CpuUse:
    """The run's processes: workers, this one (the fake LLM, the feeder), the servers."""
    postmaster = int((h.servers.postgres.data / "postmaster.pid").read_text().split()[0])
    parts = {
        "workers": summed(process_seconds, [p.process.pid for p in h.workers()]),
        "bench": own_seconds,
        "postgres": lambda: tree_seconds(postmaster),
        "redis": summed(process_seconds, [h.servers.redis.process.pid]),
    }
    if bouncer is not None and bouncer.process is not None:
        parts["pgbouncer"] = summed(process_seconds, [bouncer.process.pid])
    return CpuUse(parts)


def run_pass(
    servers: Servers, counts: list[int], size: Size, bouncer: PgBouncer | None
) -> list[Run]:
    runs = []
    for count in counts:
        run = measure(servers, count, size, bouncer)
        runs.append(run)
        o = run.outcome
        cpu = ", ".join(f"{part} {seconds:.1f}" for part, seconds in run.cpu.used.items())
        print(
            f"{'PgBouncer' if bouncer else 'direct':<9} {count} hosts: {run.msgs_per_s:7.1f} msg/s"
            f" in {run.window:6.1f} s (fed in {run.fed:.1f} s), {o.lost} lost,"
            f" {o.duplicated} duplicated, {o.stranded} stranded; "
            + "; ".join([*o.notes, f"CPU s: {cpu}"]),
            flush=True,
        )
    return runs


def pooler(servers: Servers) -> PgBouncer | None:
    """A PgBouncer of the bench's own, reachable from the hosts, or None (said why)."""
    try:
        return PgBouncer(
            ("127.0.0.1", servers.postgres.port),
            server_connections=POOLER_CONNECTIONS,
            also_on=servers.network.gateway,
        ).start()
    except ServiceUnavailable as exc:
        print(f"scale: the pass through PgBouncer skipped: {exc}", file=sys.stderr)
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--no-pgbouncer", action="store_true", help="skip the pass through it")
    parser.add_argument("--quick", action="store_true", help="16 sessions of 40 turns")
    parser.add_argument("--concurrency", type=int, default=4, help="threads per worker")
    args = parser.parse_args()
    size = dataclasses.replace(QUICK if args.quick else FULL, concurrency=args.concurrency)
    why = hosts.unavailable()
    if why is not None:
        print(f"scale: skipped, no worker hosts here: {why}", file=sys.stderr)
        emit({"runs": 0, "skipped": 1})
        return
    servers = Servers()
    runs: list[Run] = []
    try:
        runs += run_pass(servers, args.hosts, size, None)
        bouncer = None if args.no_pgbouncer else pooler(servers)
        if bouncer is not None:
            try:
                runs += run_pass(servers, args.hosts, size, bouncer)
            finally:
                bouncer.stop()
    finally:
        servers.close()
    print_runs(runs, size, LLM_SECONDS)
    result = figures(runs)
    emit(result)
    sys.exit(1 if result["failed_runs"] else 0)


if __name__ == "__main__":
    main()
