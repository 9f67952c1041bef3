"""Sending follow-up tasks by name, always after the write they follow has committed."""

from __future__ import annotations

import atexit
import logging
import queue
import threading
from collections.abc import Iterable
from typing import Any

from celery import Celery
from pydantic import ValidationError

from memoryd.errors import TaskRejected, field_errors
from memoryd.models.keys import SessionKey
from memoryd.models.schemas import SessionIds
from memoryd.worker.config import EXTRACTION_QUEUE

log = logging.getLogger(__name__)

EXTRACT_TASK = "memoryd.extract_session"
FLUSH_ON_EXIT_SECONDS = 5.0


def triggered_key(agent_id: Any, user_id: Any, session_id: Any) -> SessionKey:
    """The session an extract trigger names, checked as ids: any Celery client may send
    one. TaskRejected names each bad argument (it was read as no session at all, or
    failed its statement as a bug)."""
    try:
        ids = SessionIds(agent_id=agent_id, user_id=user_id, session_id=session_id)
    except ValidationError as exc:
        problems = "; ".join(f"{field}: {message}" for field, message in field_errors(exc))
        raise TaskRejected(f"{EXTRACT_TASK}: {problems}") from None
    return SessionKey(ids.agent_id, ids.user_id, ids.session_id)


def dispatch_extract(
    app: Celery,
    keys: Iterable[SessionKey],
    producer: Any = None,
    headers: dict[str, str] | None = None,
) -> int:
    """Publish one extract trigger per session, through Celery's public send_task, so
    Flower sees each as sent. Hot paths pass a long-lived producer: acquiring one per
    message costs more than the publish itself. `headers` carry the sender's trace
    context (tracing.headers) to the task's span."""
    sent = 0
    with app.producer_or_acquire(producer) as active:
        for key in keys:
            # Nobody awaits a trigger's result: with a result backend, send_task would
            # otherwise subscribe this process to every trigger's result channel, and
            # a task sending triggers would list each among its children.
            app.send_task(
                EXTRACT_TASK,
                args=key.as_args(),
                queue=EXTRACTION_QUEUE,
                producer=active,
                ignore_result=True,
                add_to_parent=False,
                headers=headers,
            )
            sent += 1
    return sent


class BackgroundDispatcher:
    """Publishes extract triggers from a background thread.

    The chat backend's enqueue call returns as soon as its turns are committed; it never
    waits on, or fails because of, the broker. A trigger that cannot be published (broker
    down, process killed) is only a delay: beat's sweep dispatches every due session from
    the database. Pending triggers are flushed when the process exits normally.
    """

    def __init__(self, app: Celery) -> None:
        self.app = app
        # Load the broker's transport now, in the caller's thread: loading it lazily in
        # the publishing thread can fall into interpreter shutdown (a script that ends
        # right after its last enqueue), where the imports it makes are refused and
        # the trigger would be lost. No network I/O happens here.
        _ = app.connection_for_write().transport
        _ = app.amqp.send_task_message, app.amqp.router, app.backend  # and send_task's parts
        self._queue: queue.Queue[tuple[SessionKey, dict[str, str] | None]] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="memoryd-dispatch", daemon=True)
        self._thread.start()
        atexit.register(self.flush, FLUSH_ON_EXIT_SECONDS)

    def submit(self, keys: Iterable[SessionKey], headers: dict[str, str] | None = None) -> int:
        """Queue triggers; `headers` (the caller's trace context, taken in its thread)
        go with each."""
        count = 0
        for key in keys:
            self._queue.put((key, headers))
            count += 1
        return count

    def flush(self, timeout: float = FLUSH_ON_EXIT_SECONDS) -> bool:
        """Wait until every submitted trigger was handed to the broker (or dropped)."""
        done = threading.Event()

        def wait_for_queue() -> None:
            self._queue.join()
            done.set()

        threading.Thread(target=wait_for_queue, daemon=True).start()
        return done.wait(timeout)

    def _run(self) -> None:
        producer = None  # one for the thread's life
        while True:
            key, headers = self._queue.get()
            try:
                if producer is None:
                    producer = self.app.amqp.Producer(self.app.connection_for_write())
                dispatch_extract(self.app, [key], producer, headers)
            except Exception as exc:  # the sweep re-dispatches from the database
                log.warning("could not publish extract trigger for %s: %s", key, exc)
                producer = None
            finally:
                self._queue.task_done()
