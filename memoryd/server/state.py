"""What every request shares: settings, the MemoryClient, the API-key cache."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from memoryd.client import MemoryClient
from memoryd.models.db import session_scope
from memoryd.server.keys import Principal, hash_key, lookup
from memoryd.settings import Settings


@dataclass
class KeyCache:
    """Looked-up keys, trusted for `ttl` seconds: a key check on every request would add
    a database round trip to each call; a revoked key stops working within `ttl`."""

    settings: Settings
    ttl: float
    _entries: dict[str, tuple[float, Principal | None]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def principal(self, secret: str) -> Principal | None:
        digest = hash_key(secret)
        now = time.monotonic()
        with self._lock:
            hit = self._entries.get(digest)
        if hit is not None and hit[0] > now:
            return hit[1]
        with session_scope(self.settings, readonly=True) as session:
            found = lookup(session, secret)
        if self.ttl > 0:
            with self._lock:
                if len(self._entries) > 10_000:  # unknown keys must not grow it forever
                    self._entries.clear()
                self._entries[digest] = (now + self.ttl, found)
        return found


@dataclass
class ServerState:
    settings: Settings
    client: MemoryClient
    keys: KeyCache


def get_state(request: Request) -> ServerState:
    state: ServerState = request.app.state.memoryd
    return state


State = Annotated[ServerState, Depends(get_state)]
