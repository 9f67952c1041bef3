"""The chaos suite's runs side by side (`bench/chaos.py --jobs N`).

N job processes, each `bench/chaos.py --serve` with servers of its own, so a scenario
that kills its PostgreSQL or Redis meets no other scenario. Each job takes the next run
as soon as it finished one, the longest first. Only the first job makes the worker
hosts' network, and it alone takes the runs on hosts: one network per suite run.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from bench.chaos_harness import Outcome
from bench.chaos_scenarios import SCENARIOS

CHAOS = Path(__file__).with_name("chaos.py")
Run = tuple[str, str]  # (scenario, backend)


def expected_seconds(run: Run) -> float:
    scenario = SCENARIOS.get(run[0])
    return scenario.seconds if scenario else 10.0


def job_exited(run: Run, why: str) -> Outcome:
    """The outcome of a run whose job process ended before it answered: a failure."""
    outcome = Outcome(run[0], run[1], 0, 0, 0, 0, 0, 0, 0.0, notes=[why])
    outcome.must_be_zero["job_exited"] = 1
    return outcome


class Jobs:
    """Hands the runs out to the job processes and collects what they answer."""

    def __init__(self, runs: list[Run], quick: bool, report: Callable[[Outcome], None]) -> None:
        self.pending = sorted(runs, key=expected_seconds, reverse=True)
        self.quick = quick
        self.report = report
        self.lock = threading.Lock()
        self.outcomes: list[Outcome] = []
        self.skipped: list[str] = []

    def run(self, jobs: int) -> tuple[list[Outcome], list[str]]:
        threads = [threading.Thread(target=self.drive, args=(i == 0,)) for i in range(jobs)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # Runs no job could take: only the hosts' job takes hosts runs, and it died.
        self.outcomes += [job_exited(run, "no job process left to run it") for run in self.pending]
        return self.outcomes, self.skipped

    def take(self, with_hosts: bool) -> Run | None:
        with self.lock:
            mine = [r for r in self.pending if with_hosts or r[1] != "hosts"]
            if not mine:
                return None
            # The hosts' job runs the hosts scenarios first: nobody else can.
            run = next((r for r in mine if r[1] == "hosts"), mine[0])
            self.pending.remove(run)
            return run

    def drive(self, with_hosts: bool) -> None:
        """One job process: start it, feed it runs one at a time, read each answer."""
        argv = [sys.executable, str(CHAOS), "--serve"]
        argv += ["--quick"] * self.quick + ["--with-hosts"] * with_hosts
        job = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert job.stdin is not None and job.stdout is not None
        try:
            while (run := self.take(with_hosts)) is not None:
                job.stdin.write(f"{run[0]} {run[1]}\n")
                job.stdin.flush()
                answer = job.stdout.readline()
                if not answer:
                    self.record(job_exited(run, f"its job process exited ({job.wait()})"))
                    return
                self.settle(json.loads(answer))
        finally:
            if job.poll() is None:
                job.stdin.close()  # the job closes its servers and ends
                job.wait()

    def settle(self, answer: dict[str, object]) -> None:
        if "skipped" in answer:
            with self.lock:
                self.skipped.append(str(answer["skipped"]))
            return
        figures = dict(answer["outcome"])  # type: ignore[call-overload]
        self.record(Outcome(**figures))

    def record(self, outcome: Outcome) -> None:
        with self.lock:
            self.outcomes.append(outcome)
            self.report(outcome)


def answer(outcome: Outcome | None, skipped: str = "") -> str:
    """A job process's answer for one run: its outcome, or the run it had to skip."""
    if outcome is None:
        return json.dumps({"skipped": skipped})
    return json.dumps({"outcome": dataclasses.asdict(outcome)})
