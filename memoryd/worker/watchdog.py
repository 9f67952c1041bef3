"""The consumer watchdog: a worker whose consumer stops taking messages exits.

A worker can reconnect to its broker and still never take another message (Redis
clients have wedged like this after a broker restart). Its process looks alive, so no
supervisor would replace it, and its sessions would wait forever. So each worker checks
itself: when it has received nothing for `consumer_watchdog_seconds`, it sends a ping
to its own direct queue; if its consumer does not receive that ping within the same
time, the worker exits with status 75 (EX_TEMPFAIL) and its supervisor (compose,
systemd, Kubernetes) starts a fresh one. Nothing is lost by exiting: its batches' leases
run out and the sweeper returns their turns. While the broker is down the ping cannot be
sent, and the worker waits instead: reconnecting is Celery's own job.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from typing import Any

from celery import Celery
from celery.utils.nodenames import worker_direct

log = logging.getLogger(__name__)

PING_TASK = "memoryd.worker.ping"
EXIT_WEDGED = 75


class ConsumerWatchdog:
    def __init__(self, app: Celery, hostname: str, seconds: float) -> None:
        self.app = app
        self.queue = worker_direct(hostname)  # bound to Celery's C.dq2 exchange
        self.seconds = seconds
        self.received_at = time.monotonic()
        self._received = threading.Event()
        self._thread = threading.Thread(target=self._run, name="consumer-watchdog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def saw_message(self) -> None:
        """Called for every message the consumer receives (the task_received signal)."""
        self.received_at = time.monotonic()
        self._received.set()

    def _run(self) -> None:
        while True:
            time.sleep(self.seconds / 4)
            if time.monotonic() - self.received_at < self.seconds:
                continue  # it took a message recently: alive
            self._received.clear()
            try:
                self.app.send_task(
                    PING_TASK, args=[uuid.uuid4().hex], queue=self.queue, retry=False
                )
            except Exception as exc:  # the broker is down: Celery reconnects, we wait
                log.info("watchdog could not send its ping (%s); checking again later", exc)
                continue
            if not self._received.wait(self.seconds):
                log.critical(
                    "the consumer took no message for %.0f s, not even this worker's own "
                    "ping: exiting so that a fresh worker replaces it",
                    self.seconds,
                )
                logging.shutdown()
                os._exit(EXIT_WEDGED)


def ping(_token: str) -> None:
    """Receiving it is the point; running it does nothing."""


def install(app: Celery, hostname: str, seconds: float, **_kw: Any) -> ConsumerWatchdog:
    watchdog = ConsumerWatchdog(app, hostname, seconds)
    watchdog.start()
    return watchdog
