"""The Celery app. `celery -A memoryd.worker worker|beat|flower` finds it here."""

from __future__ import annotations

import logging
import sys
from typing import Any

from celery import Celery
from celery.signals import (
    task_received,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)

from memoryd import tracing
from memoryd.errors import ConfigError, DatabaseUnavailable, InvalidSettings
from memoryd.models.db import dispose_engines
from memoryd.settings import Settings, get_settings
from memoryd.worker.bindings import remove_legacy_bindings
from memoryd.worker.config import celery_config
from memoryd.worker.watchdog import ConsumerWatchdog, install

log = logging.getLogger(__name__)

TASK_MODULES = [
    "memoryd.tasks.ingest",
    "memoryd.tasks.extraction",
    "memoryd.tasks.maintenance",
    "memoryd.tasks.embedding",
    "memoryd.tasks.worker",
]


def make_celery(settings: Settings | None = None) -> Celery:
    """An app configured from `settings`; without them, from the environment when first used."""
    celery = Celery("memoryd", include=TASK_MODULES)
    if settings is not None:
        celery.conf.update(celery_config(settings))
    else:

        def _configure(sender: Celery, **_kw: Any) -> None:
            _configured_or_exit(sender)

        celery.on_configure.connect(_configure, weak=False)
    return celery


def _settings_or_exit() -> Settings:
    """The process's settings; a mistake in them ends it with one line per mistake."""
    try:
        return get_settings()
    except InvalidSettings as exc:
        for line in exc.lines:
            print(f"memoryd: invalid setting: {line}", file=sys.stderr)
        raise SystemExit(2) from None


def _configured_or_exit(celery: Celery) -> None:
    """`celery` configured from the process's settings. A mistake ends the process with
    one line: Celery logs and ignores what its signals' handlers raise, and a worker
    left unconfigured would start on Celery's default broker, someone else's perhaps."""
    try:
        celery.conf.update(celery_config(_settings_or_exit()))
    except ConfigError as exc:
        print(f"memoryd: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


app = make_celery()


@worker_init.connect
def _refuse_to_start_without_a_database(**_kw: Any) -> None:
    """A worker that cannot use its database must not report ready and take tasks: it
    waits up to startup_wait_seconds for it (a restart, compose's ordering), then exits
    with one line saying why."""
    from memoryd.models.migrate import check_ready

    settings = _settings_or_exit()
    try:
        check_ready(settings, wait_seconds=settings.worker.startup_wait_seconds)
    except (DatabaseUnavailable, ConfigError) as exc:
        print(f"memoryd worker: {exc}", file=sys.stderr)
        raise SystemExit(3) from None
    dispose_engines()  # no connection opened here may be shared with forked children


_watchdog: ConsumerWatchdog | None = None


@worker_ready.connect
def _watch_the_consumer(sender: Any = None, **_kw: Any) -> None:
    """See worker/watchdog.py: a worker whose consumer wedges exits to be replaced."""
    global _watchdog
    seconds = _settings_or_exit().worker.consumer_watchdog_seconds
    if seconds > 0 and sender is not None:
        _watchdog = install(sender.app, sender.hostname, seconds, consumer=sender)


@worker_ready.connect
def _remove_bindings_older_versions_left(sender: Any = None, **_kw: Any) -> None:
    """See worker/bindings.py: without this, what is sent to the extraction queue's
    exchange still lands in the other queues on a broker an older version used."""
    if sender is None:
        return
    try:
        remove_legacy_bindings(sender.app)
    except Exception as exc:  # the worker works without it; say so and go on
        log.warning("could not remove the queue bindings of older versions: %s", exc)


@task_received.connect
def _consumer_took_a_message(**_kw: Any) -> None:
    if _watchdog is not None:
        _watchdog.saw_message()


@worker_process_init.connect
def _fresh_connections_after_fork(**_kw: Any) -> None:
    # Database connections must never be shared across a fork.
    dispose_engines()


@worker_process_shutdown.connect
@worker_shutdown.connect
def _export_the_last_spans(**_kw: Any) -> None:
    # A pool process may end without running atexit: what it traced would be lost.
    tracing.flush()
