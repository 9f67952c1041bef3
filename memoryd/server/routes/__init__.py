"""One router per area of the API."""

from __future__ import annotations

from fastapi import APIRouter

from memoryd.server.routes import agents, memories, ops, profiles, read, scopes, stored, turns

ROUTERS: list[APIRouter] = [
    turns.router,
    read.router,
    memories.router,
    profiles.router,
    scopes.router,
    stored.router,
    agents.router,
    ops.router,
]
