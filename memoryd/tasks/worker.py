"""`memoryd.worker.ping`: what a worker's consumer watchdog sends itself (worker/watchdog.py)."""

from __future__ import annotations

from memoryd.worker import app
from memoryd.worker.watchdog import PING_TASK, ping

app.task(name=PING_TASK, ignore_result=True)(ping)
