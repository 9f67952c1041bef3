"""The scaling bench's report (bench/scale.py): the table it prints of its runs, and the
figures of the JSON line it ends with."""

from __future__ import annotations

from bench.scale_runs import Run, Size

LEGEND = """\
of bound: against every slot busy with nothing but a 2 s call, all the time
batch s: a batch's mean time from its claim to its write (the LLM call in it)
write s: from a batch's write to its session's next claim (the write in it)
slots busy: the share of the slots' time from claim to write
pool wait s: seconds all clients waited for one of PgBouncer's server connections
pg conns: the most connections PostgreSQL held for the run's database at once
cores: CPU of the bench's processes (workers, PostgreSQL, Redis, PgBouncer, the fake
LLM) per second; machine: the share of both cores busy, other work on it included"""


def print_runs(runs: list[Run], size: Size, llm_seconds: float) -> None:
    print(
        f"\nscale: {size.chats} sessions x {size.turns} turns, one worker per host "
        f"(threads, concurrency {size.concurrency}), LLM {llm_seconds:.0f} s per call"
    )
    header = (
        f"{'database':<14} {'hosts':>5} {'seconds':>7} {'msg/s':>6} {'vs 1 host':>9} "
        f"{'of bound':>8} {'batch s':>7} {'write s':>7} {'slots busy':>10} {'lost/dup/strand':>15} "
        f"{'pool wait s':>11} {'pg conns':>8} {'cores':>5} {'machine':>7}"
    )
    print(header)
    print("-" * len(header))
    for run in runs:
        base = baseline(runs, run.pooled)
        ratio = f"{run.msgs_per_s / base:>8.2f}x" if base else f"{'-':>9}"
        o = run.outcome
        print(
            f"{'via PgBouncer' if run.pooled else 'PostgreSQL':<14} {run.hosts:>5} "
            f"{run.window:>7.1f} {run.msgs_per_s:>6.1f} {ratio} {run.of_bound:>8.0%} "
            f"{run.batch_seconds:>7.2f} {run.write_seconds:>7.2f} {run.slots_busy:>10.0%} "
            f"{f'{o.lost}/{o.duplicated}/{o.stranded}':>15} "
            f"{'-' if run.pool_wait is None else f'{run.pool_wait:.1f}':>11} "
            f"{run.connections:>8} {run.cores:>5.2f} {run.cpu.busy:>7.0%}"
        )
    print(LEGEND)


def baseline(runs: list[Run], pooled: bool) -> float | None:
    """The pass's 1-host msg/s, measured in the same run."""
    return next((r.msgs_per_s for r in runs if r.pooled == pooled and r.hosts == 1), None)


def figures(runs: list[Run]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for run in runs:
        prefix = f"{'pgbouncer' if run.pooled else 'direct'}_{run.hosts}"
        base = baseline(runs, run.pooled)
        out[f"{prefix}_msgs_per_s"] = run.msgs_per_s
        out[f"{prefix}_ratio"] = run.msgs_per_s / base if base else None
        out[f"{prefix}_cores"] = run.cores
        out[f"{prefix}_batches_per_s"] = len(run.spans) / run.window if run.window else None
        out[f"{prefix}_postgres_cores"] = (
            run.cpu.used["postgres"] / run.window if run.window else None
        )
        out[f"{prefix}_connections"] = run.connections
    outcomes = [r.outcome for r in runs]
    return {
        **out,
        "lost": sum(o.lost for o in outcomes),
        "duplicated": sum(o.duplicated for o in outcomes),
        "stranded": sum(o.stranded for o in outcomes),
        "dead_lettered": sum(o.dead_lettered for o in outcomes),
        "calls_made_twice": sum(o.must_be_zero.get("calls_made_twice", 0) for o in outcomes),
        "runs": len(runs),
        "failed_runs": sum(not o.ok for o in outcomes),
    }
