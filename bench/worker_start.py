"""How long a worker takes to start, and the CPU it spends on it: `memoryd worker` against
Celery's own command line (`celery -A memoryd.worker worker`, the baseline), each started
`--runs` times in turns, after one unmeasured start of each, on the embedded default
(SQLite, the filesystem broker) until its log says "ready.". A supervisor pays this
each time it replaces a killed worker.

    .venv/bin/python bench/worker_start.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the repository, not bench/

from bench.common import emit, percentile, print_table
from memoryd.models.migrate import upgrade
from memoryd.settings import Settings
from testkit.workers import settings_env

COMMANDS = {
    "celery": ["-m", "celery", "-A", "memoryd.worker", "worker"],  # the baseline
    "memoryd": ["-m", "memoryd", "worker"],
}
OPTIONS = ["--pool=threads", "--concurrency=4", "--loglevel=INFO", "--without-gossip"]
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def start_once(command: list[str], env: dict[str, str], log: Path) -> tuple[float, float]:
    """(seconds until ready, CPU seconds spent by then) of one start."""
    log.write_bytes(b"")
    began = time.monotonic()
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, *command, *OPTIONS], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        while b"ready." not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() - began > 60:
                raise SystemExit(f"worker did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.02)
        return time.monotonic() - began, cpu_seconds(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs: must be 1 or more")
    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(data_dir=Path(folder))
        upgrade(settings)
        env = settings_env(settings)
        log = Path(folder) / "worker.log"
        for command in COMMANDS.values():  # unmeasured: the first start reads cold files
            start_once(command, env, log)
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
        for _ in range(args.runs):  # in turns, so a slow spell of the machine hits both
            for name, command in COMMANDS.items():
                runs[name].append(start_once(command, env, log))
        figures: dict[str, float] = {}
        for name, starts in runs.items():
            figures[f"{name}_ready_p50_s"] = percentile([s[0] for s in starts], 50)
            figures[f"{name}_cpu_p50_s"] = percentile([s[1] for s in starts], 50)
    rows = []
    for measure, unit in (("ready", "s"), ("cpu", "s CPU")):
        base = figures[f"celery_{measure}_p50_s"]
        for name in COMMANDS:
            value = figures[f"{name}_{measure}_p50_s"]
            rows.append((f"{name}: {measure} (p50 of {args.runs})", value, unit, value / base))
    print_table("worker start: memoryd worker against celery -A memoryd.worker worker", rows)
    emit(figures)


if __name__ == "__main__":
    main()
