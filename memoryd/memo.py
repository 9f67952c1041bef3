"""A process-wide memo of recent answers, for reads that cost more than their answer
changes (a large scope's statistics, whether a scope is past the size read whole).
Each entry is reused for a fixed time, then read again; the whole memo is dropped
when it fills, which bounds its memory without bookkeeping per entry."""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable
from typing import Generic, TypeVar

T = TypeVar("T")

_memos: list[RecentMemo[object]] = []


class RecentMemo(Generic[T]):
    def __init__(self, seconds: float, size: int = 10_000) -> None:
        self.seconds = seconds
        self.size = size
        self._items: dict[Hashable, tuple[float, T]] = {}
        self._lock = threading.Lock()
        _memos.append(self)  # type: ignore[arg-type]

    def get(self, key: Hashable) -> T | None:
        """The value remembered under `key`, while it is recent enough to reuse."""
        with self._lock:
            item = self._items.get(key)
        if item is not None and time.monotonic() - item[0] < self.seconds:
            return item[1]
        return None

    def put(self, key: Hashable, value: T) -> None:
        with self._lock:
            if len(self._items) >= self.size:
                self._items.clear()
            self._items[key] = (time.monotonic(), value)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


def clear_all() -> None:
    """Forget every memo (tests that rebuild a database under the same URL)."""
    for memo in _memos:
        memo.clear()
