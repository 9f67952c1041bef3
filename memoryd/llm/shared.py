"""Providers built once per process and key, shared by every Settings copy that agrees
on the key (agents' overrides are copies of Settings that differ in other fields)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class Shared(Generic[T]):
    """At most `size` providers, least recently used dropped first. Built under the
    lock, so two threads asking for one model at once load it once."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[Hashable, T] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        with self.lock:
            item = self.items.get(key)
            if item is None:
                item = self.items[key] = build()
                while len(self.items) > self.size:
                    self.items.popitem(last=False)
            self.items.move_to_end(key)
            return item

    def clear(self) -> None:
        with self.lock:
            self.items.clear()
