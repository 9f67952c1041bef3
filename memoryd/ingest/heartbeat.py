"""Lease renewal while a batch's slow work runs, so a live worker is never taken over.

A slow model or a long Retry-After can keep one LLM call going for longer than
`lease_seconds`. While it runs, a thread renews the batch's lease every third of the
lease; when the worker dies, renewals stop and the lease runs out. A renewal that finds
the lease gone (the sweeper or another claim returned the turns) stops, and the batch's
write phase then discards its result.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from sqlalchemy.orm import Session

from memoryd.errors import error_text
from memoryd.models.coordination import database_time
from memoryd.models.db import session_scope
from memoryd.settings import Settings

log = logging.getLogger(__name__)

Renew = Callable[[Session, datetime], bool]  # True while the lease is still ours


class Heartbeat:
    def __init__(self, settings: Settings, renew: Renew, name: str) -> None:
        self.settings = settings
        self.renew = renew
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{name}", daemon=True)

    def _run(self) -> None:
        interval = self.settings.extraction.lease_seconds / 3
        while not self._stop.wait(interval):
            try:
                with session_scope(self.settings.storage) as session:
                    if not self.renew(session, database_time(session)):
                        self.lost = True
                        log.warning("%s: lease lost while working", self._thread.name)
                        return
            except Exception as exc:  # the database is down: try again next beat
                log.warning("%s: could not renew the lease: %s", self._thread.name, error_text(exc))


@contextmanager
def kept_alive(settings: Settings, renew: Renew, name: str) -> Iterator[Heartbeat]:
    """Renew a lease for as long as the block runs."""
    beat = Heartbeat(settings, renew, name)
    beat._thread.start()
    try:
        yield beat
    finally:
        beat._stop.set()
        beat._thread.join(timeout=5)
