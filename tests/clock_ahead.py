"""Run a Python module on a wall clock that runs ahead of the machine's, as a host with a
wrong clock would: `python -m tests.clock_ahead MINUTES -m MODULE ARGS...`.

The clock is freezegun's, ticking, moved MINUTES forward: what Python code reads
(`time.time`, `datetime.now`, `date.today`) is ahead; waits and timeouts still run on
the machine's own clock, as on a real host. (Debian's faketime moves the C library's
clocks instead, but breaks every timed wait of CPython's threads with them.)
"""

from __future__ import annotations

import runpy
import sys
from datetime import UTC, datetime, timedelta

import freezegun


def main() -> None:
    minutes, flag, module, *args = sys.argv[1:]
    if flag != "-m":
        sys.exit("usage: python -m tests.clock_ahead MINUTES -m MODULE [ARGS...]")
    ahead = datetime.now(UTC) + timedelta(minutes=float(minutes))
    # By default freezegun gives the real time to code called from `threading` (every
    # task of a thread pool): here every thread reads the host's clock.
    freezegun.configure(default_ignore_list=[])
    freezegun.freeze_time(ahead, tick=True).start()
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
