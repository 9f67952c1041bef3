"""What a bench's processes used, to tell a run bound by the CPU from one bound by
waiting: CPU seconds of each part from /proc (Linux) and how busy the whole machine was
meanwhile (other work on it included), and the most connections PostgreSQL held."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command's name (state first), None once gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def process_seconds(pid: int, children: bool = False) -> float:
    """CPU seconds `pid` used; with `children`, also those of its children that ended."""
    fields = _stat(pid)
    if fields is None:
        return 0.0
    used = int(fields[11]) + int(fields[12])  # utime, stime
    if children:
        used += int(fields[13]) + int(fields[14])  # cutime, cstime: children waited for
    return used / TICK


def tree_seconds(parent: int) -> float:
    """CPU seconds of `parent`, its children alive now, and those that ended (a
    server's connections, which come and go)."""
    total = process_seconds(parent, children=True)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None and int(fields[1]) == parent:
                total += process_seconds(int(entry.name))
    return total


def postmaster_pid(url: str) -> int | None:
    """The pid of the PostgreSQL server at `url` when it runs on this machine and its
    data directory is readable here (a superuser may ask where it is), else None."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            folder = Path(str(conn.execute(text("SHOW data_directory")).scalar_one()))
        return int((folder / "postmaster.pid").read_text().split()[0])
    except Exception:  # not a superuser, another host, another layout: no figure
        return None
    finally:
        engine.dispose()


def machine_busy() -> tuple[float, float]:
    """The machine's busy and total CPU seconds since boot, all cores (/proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return (sum(fields) - idle) / TICK, sum(fields) / TICK


def own_seconds() -> float:
    """This process's CPU seconds, every thread."""
    times = os.times()
    return times.user + times.system


class CpuUse:
    """CPU seconds of named parts between `start()` and `stop()`. A part is a function
    giving its seconds so far; the machine's busy share is measured alongside."""

    def __init__(self, parts: dict[str, Callable[[], float]]) -> None:
        self.parts = parts
        self.used: dict[str, float] = {}
        self.busy = 0.0  # share of the machine's CPU time that was busy, 0 to 1

    def start(self) -> CpuUse:
        self._begin = {name: read() for name, read in self.parts.items()}
        self._machine = machine_busy()
        return self

    def stop(self) -> CpuUse:
        self.used = {name: read() - self._begin[name] for name, read in self.parts.items()}
        busy, total = machine_busy()
        self.busy = (busy - self._machine[0]) / max(total - self._machine[1], 1e-9)
        return self


def summed(read: Callable[[int], float], pids: Iterable[int]) -> Callable[[], float]:
    """A part made of several processes, fixed when the part is made."""
    fixed = list(pids)
    return lambda: sum(read(pid) for pid in fixed)


class ConnectionPeak:
    """The most connections PostgreSQL had open to the database at `url` (its own left
    out), sampled every `every` seconds in the background from `start()` to `stop()`."""

    def __init__(self, url: str, every: float = 0.5) -> None:
        self.engine = create_engine(url, poolclass=NullPool)
        self.every = every
        self.peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="connections", daemon=True)

    def start(self) -> ConnectionPeak:
        self._thread.start()
        return self

    def stop(self) -> int:
        """The peak; stops sampling (again, or never started: no harm)."""
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()
        self.engine.dispose()
        return self.peak

    def _sample(self) -> None:
        count = text(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        with self.engine.connect() as conn:
            while not self._done.wait(self.every):
                self.peak = max(self.peak, int(conn.execute(count).scalar_one()))
                conn.rollback()
