"""Sending follow-up tasks by name, always after the write they follow has committed."""

from __future__ import annotations

from collections.abc import Iterable

from celery import Celery

from memoryd.buffer import SessionKey
from memoryd.worker.config import EXTRACTION_QUEUE

EXTRACT_TASK = "memoryd.extract_session"


def dispatch_extract(app: Celery, keys: Iterable[SessionKey]) -> int:
    sent = 0
    for key in keys:
        app.send_task(EXTRACT_TASK, args=key.as_args(), queue=EXTRACTION_QUEUE)
        sent += 1
    return sent
