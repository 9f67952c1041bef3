"""What every request shares: settings, the MemoryClient, the API-key cache and the
throttle of failed key checks."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from memoryd.client import MemoryClient
from memoryd.server.keys import KeyCache
from memoryd.server.throttle import FailureThrottle
from memoryd.settings import Settings


@dataclass
class ServerState:
    settings: Settings
    client: MemoryClient
    keys: KeyCache
    pool: ThreadPoolExecutor  # threads of the routes that hop themselves (in_thread)
    throttle: FailureThrottle = field(default_factory=FailureThrottle)  # failed key checks


def server_state(request: Request) -> ServerState:
    state: ServerState = request.app.state.memoryd
    return state


async def get_state(request: Request) -> ServerState:
    """The dependency: a coroutine, so FastAPI reads it on the event loop, where a plain
    function would cost each request a hop to a thread."""
    return server_state(request)


State = Annotated[ServerState, Depends(get_state)]
