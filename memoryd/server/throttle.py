"""Guessing keys is slowed down: a client address that failed `limit` key checks (a
Bearer key or the page's sign-in; MEMORYD_AUTH_FAILURE_LIMIT, 0 for none) within WINDOW
seconds is answered 429 with Retry-After until its oldest failure leaves the window.
Successful calls are never counted, so a working deployment never meets it. The count
is per server process and by the address the server sees: behind a proxy, run the
server with the proxy's forwarded address (uvicorn's --proxy-headers,
--forwarded-allow-ips), or all clients share one count."""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque

LIMIT = 20
WINDOW = 60.0
ADDRESSES = 10_000  # addresses remembered at most; the longest quiet ones go first


class FailureThrottle:
    def __init__(self, limit: int = LIMIT, window: float = WINDOW) -> None:
        self.limit = limit
        self.window = window
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def retry_after(self, address: str) -> int | None:
        """Seconds until `address` may try again, or None when it may now."""
        if self.limit <= 0:
            return None
        now = time.monotonic()
        with self._lock:
            failures = self._failures.get(address)
            if failures is None:
                return None
            while failures and failures[0] <= now - self.window:
                failures.popleft()
            if len(failures) < self.limit:
                return None
            return max(1, math.ceil(failures[0] + self.window - now))

    def failed(self, address: str) -> None:
        if self.limit <= 0:
            return
        with self._lock:
            failures = self._failures.setdefault(address, deque(maxlen=self.limit))
            failures.append(time.monotonic())
            self._failures.move_to_end(address)
            while len(self._failures) > ADDRESSES:
                self._failures.popitem(last=False)
