"""What every request shares: settings, the MemoryClient, the API-key cache and the
throttle of failed key checks."""

from __future__ import annotations

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
    throttle: FailureThrottle = field(default_factory=FailureThrottle)  # failed key checks


def get_state(request: Request) -> ServerState:
    state: ServerState = request.app.state.memoryd
    return state


State = Annotated[ServerState, Depends(get_state)]
