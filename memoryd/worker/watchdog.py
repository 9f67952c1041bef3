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

A busy worker is not wedged: with acks_late and a prefetch of one per slot, a worker
whose every slot holds a task (a long LLM call) rightly takes no message, its own ping
included. So the watchdog pings only while a slot is free, and a ping that its slots
filling up keeps waiting is no sign of a wedge either.
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
from celery.worker import state as worker_state

log = logging.getLogger(__name__)

PING_TASK = "memoryd.worker.ping"
EXIT_WEDGED = 75


class ConsumerWatchdog:
    def __init__(self, app: Celery, hostname: str, seconds: float, consumer: Any = None) -> None:
        self.app = app
        self.consumer = consumer  # Celery's Consumer: its QoS says how many it may hold
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

    def saturated(self) -> bool:
        """Every slot holds a task it received: the consumer may take no more, so no
        ping can arrive until one finishes."""
        limit = getattr(getattr(self.consumer, "qos", None), "value", 0)
        return bool(limit) and len(worker_state.reserved_requests) >= limit

    def _run(self) -> None:
        while True:
            time.sleep(self.seconds / 4)
            if self.saturated():
                self.received_at = time.monotonic()  # busy, not wedged
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
            if not self._ping_arrives():
                log.critical(
                    "the consumer took no message for %.0f s, not even this worker's own "
                    "ping: exiting so that a fresh worker replaces it",
                    self.seconds,
                )
                logging.shutdown()
                os._exit(EXIT_WEDGED)

    def _ping_arrives(self) -> bool:
        """Whether the ping arrived within `seconds`, or the slots filled up meanwhile
        (then it waits for a free one, as any message would)."""
        deadline = time.monotonic() + self.seconds
        while (left := deadline - time.monotonic()) > 0:
            if self._received.wait(min(left, 0.25)) or self.saturated():
                return True
        return False


def ping(_token: str) -> None:
    """Receiving it is the point; running it does nothing."""


def install(
    app: Celery, hostname: str, seconds: float, consumer: Any = None, **_kw: Any
) -> ConsumerWatchdog:
    watchdog = ConsumerWatchdog(app, hostname, seconds, consumer)
    watchdog.start()
    return watchdog
