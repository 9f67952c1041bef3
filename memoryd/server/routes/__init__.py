"""One router per area of the API. A new area (profiles) adds its router to ROUTERS."""

from __future__ import annotations

from fastapi import APIRouter

from memoryd.server.routes import agents, memories, ops, read, turns

ROUTERS: list[APIRouter] = [
    turns.router,
    read.router,
    memories.router,
    agents.router,
    ops.router,
]
