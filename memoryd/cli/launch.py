"""`memoryd worker` and `memoryd beat`: the app's worker and beat, started without
Celery's command line and without the rest of memoryd's.

Celery's command line loads every installed command plugin first (Flower's web app, a
REPL), and memoryd's parses every command's options: together most of a second of CPU
before a worker did anything, paid again each time a supervisor replaces a killed worker
(bench/worker_start.py). `celery -A memoryd.worker worker --pool=threads -l INFO` starts
the same worker and stays the way to the options not offered here (--autoscale,
--detach, --logfile...)."""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Sequence

from memoryd.cli.parsing import Parser, whole

WORKER_HELP = "run a Celery worker: extraction, maintenance, embedding"
BEAT_HELP = "run Celery beat: the sweep and maintenance schedule"
COMMANDS = {"worker": WORKER_HELP, "beat": BEAT_HELP}
POOLS = ("threads", "prefork", "gevent", "solo")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def launches(args: Sequence[str]) -> bool:
    """Whether this command line starts a worker or beat (handled here, not by main)."""
    return bool(args) and args[0] in COMMANDS


def _positive_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {value}")
    return seconds


def _queues(value: str) -> str:
    from memoryd.worker.config import QUEUES  # the app's module: imported to start anyway

    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in QUEUES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown queue {', '.join(map(repr, unknown)) or repr(value)}:"
            f" memoryd's are {', '.join(QUEUES)}"
        )
    return ",".join(names)


def _log_level(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-l", "--loglevel", default="INFO", type=str.upper, choices=LOG_LEVELS, help="log level"
    )


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-P",
        "--pool",
        default="threads",
        choices=POOLS,
        help="Celery pool; threads suit LLM calls, which mostly wait on the network",
    )
    parser.add_argument(
        "-c",
        "--concurrency",
        type=whole(1),
        default=None,
        help="threads (or processes) of the pool (default: MEMORYD_WORKER_CONCURRENCY)",
    )
    parser.add_argument(
        "-Q",
        "--queues",
        type=_queues,
        default=None,
        help="comma-separated queues to consume (default: extraction,maintenance,embedding)",
    )
    _log_level(parser)
    parser.add_argument(
        "-n", "--hostname", default=None, help="node name, as Celery's (default: celery@%%h)"
    )
    for part in ("gossip", "mingle", "heartbeat"):
        parser.add_argument(
            f"--without-{part}", action="store_true", help=f"as Celery's --without-{part}"
        )


def add_beat_arguments(parser: argparse.ArgumentParser) -> None:
    _log_level(parser)
    parser.add_argument(
        "-s", "--schedule", default=None, help="file of beat's schedule state, as Celery's"
    )
    parser.add_argument(
        "--max-interval",
        type=_positive_seconds,
        default=None,
        help="most seconds beat sleeps between looks at its schedule",
    )


ADD_ARGUMENTS = {"worker": add_worker_arguments, "beat": add_beat_arguments}


def add_commands(sub: argparse._SubParsersAction[Parser]) -> None:
    """Both commands in memoryd's own parser, for its help: `memoryd worker|beat` are
    handed here before that parser reads anything (memoryd/cli/__init__.py)."""
    for name, help_ in COMMANDS.items():
        ADD_ARGUMENTS[name](sub.add_parser(name, help=help_, description=help_))


def run_worker(ns: argparse.Namespace) -> int:
    """What Celery's `worker` command does with these options: build the worker from the
    app and run it until it is told to stop; its exit code is the process's."""
    from celery import maybe_patch_concurrency

    # gevent must patch the standard library before anything else imports it, as
    # `python -m celery` does first of all.
    maybe_patch_concurrency(["--pool", ns.pool])
    from celery.utils.nodenames import default_nodename, host_format

    from memoryd.worker import app
    from memoryd.worker.config import QUEUES

    worker = app.Worker(
        hostname=host_format(default_nodename(ns.hostname)),
        pool_cls=ns.pool,
        concurrency=ns.concurrency,  # None: the app's, from MEMORYD_WORKER_CONCURRENCY
        queues=ns.queues or ",".join(QUEUES),
        loglevel=ns.loglevel,
        without_gossip=ns.without_gossip,
        without_mingle=ns.without_mingle,
        without_heartbeat=ns.without_heartbeat,
    )
    worker.start()
    return int(worker.exitcode or 0)


def run_beat(ns: argparse.Namespace) -> int:
    from memoryd.worker import app

    app.Beat(loglevel=ns.loglevel, schedule=ns.schedule, max_interval=ns.max_interval).run()
    return 0


def main(argv: Sequence[str]) -> int:
    """`memoryd worker ...` or `memoryd beat ...`, as `argv` gives them."""
    command = argv[0]
    parser = Parser(prog=f"memoryd {command}", description=COMMANDS[command])
    ADD_ARGUMENTS[command](parser)
    ns = parser.parse_args(argv[1:])
    # Notices before the app's logging starts (an unknown MEMORYD_* variable) read like
    # the other commands'.
    logging.basicConfig(format="memoryd: %(message)s")
    return run_worker(ns) if command == "worker" else run_beat(ns)
