"""What every request shares: settings, the MemoryClient, the API-key cache."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from memoryd.client import MemoryClient
from memoryd.server.keys import KeyCache
from memoryd.settings import Settings


@dataclass
class ServerState:
    settings: Settings
    client: MemoryClient
    keys: KeyCache


def get_state(request: Request) -> ServerState:
    state: ServerState = request.app.state.memoryd
    return state


State = Annotated[ServerState, Depends(get_state)]
