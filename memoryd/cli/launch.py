"""`memoryd worker` and `memoryd beat`: the app's worker and beat, started without
Celery's command line and without the rest of memoryd's.

`celery -A memoryd.worker worker` starts the same worker, but Celery's command line loads
every installed command plugin first (Flower's web app, a REPL): with memoryd's own
parser, over 2 s of CPU before a worker did anything, paid again each time a supervisor
replaces a killed worker. Celery's command line stays the way to the options not offered
here (--autoscale, --detach, --logfile...)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

WORKER_HELP = "run a Celery worker: extraction, maintenance, embedding"
BEAT_HELP = "run Celery beat: the sweep and maintenance schedule"
POOLS = ("threads", "prefork", "gevent", "solo")


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {number}")
    return number


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--pool",
        default="threads",
        choices=POOLS,
        help="Celery pool; threads suit LLM calls, which mostly wait on the network",
    )
    parser.add_argument(
        "-c",
        "--concurrency",
        type=_positive_int,
        default=None,
        help="threads (or processes) of the pool (default: MEMORYD_WORKER_CONCURRENCY)",
    )
    parser.add_argument(
        "-Q",
        "--queues",
        default=None,
        help="comma-separated queues to consume (default: extraction,maintenance,embedding)",
    )
    parser.add_argument("-l", "--loglevel", default="INFO", help="Celery's log level")
    parser.add_argument(
        "-n", "--hostname", default=None, help="node name, as Celery's (default: celery@%%h)"
    )
    for part in ("gossip", "mingle", "heartbeat"):
        parser.add_argument(
            f"--without-{part}", action="store_true", help=f"as Celery's --without-{part}"
        )


def add_beat_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-l", "--loglevel", default="INFO", help="Celery's log level")
    parser.add_argument(
        "-s", "--schedule", default=None, help="file of beat's schedule state, as Celery's"
    )
    parser.add_argument(
        "--max-interval",
        type=float,
        default=None,
        help="most seconds beat sleeps between looks at its schedule",
    )


def run_worker(ns: argparse.Namespace) -> int:
    """What Celery's `worker` command does with these options: build the worker from the
    app and run it until it is told to stop; its exit code is the process's."""
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
    parser = argparse.ArgumentParser(prog="memoryd")
    sub = parser.add_subparsers(dest="command", required=True)
    add_worker_arguments(sub.add_parser("worker", help=WORKER_HELP, description=WORKER_HELP))
    add_beat_arguments(sub.add_parser("beat", help=BEAT_HELP, description=BEAT_HELP))
    ns = parser.parse_args(argv)
    return run_worker(ns) if ns.command == "worker" else run_beat(ns)
