"""The Celery app. `celery -A memoryd.worker worker|beat|flower` finds it here."""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.signals import worker_process_init

from memoryd.models.db import dispose_engines
from memoryd.settings import Settings, get_settings
from memoryd.worker.config import celery_config

TASK_MODULES = [
    "memoryd.tasks.ingest",
    "memoryd.tasks.extraction",
    "memoryd.tasks.maintenance",
]


def make_celery(settings: Settings | None = None) -> Celery:
    """An app configured from `settings`; without them, from the environment when first used."""
    celery = Celery("memoryd", include=TASK_MODULES)
    if settings is not None:
        celery.conf.update(celery_config(settings))
    else:

        def _configure(sender: Celery, **_kw: Any) -> None:
            sender.conf.update(celery_config(get_settings()))

        celery.on_configure.connect(_configure, weak=False)
    return celery


app = make_celery()


@worker_process_init.connect
def _fresh_connections_after_fork(**_kw: Any) -> None:
    # Database connections must never be shared across a fork.
    dispose_engines()
