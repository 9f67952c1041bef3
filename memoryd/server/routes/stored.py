"""Scopes named exactly as stored: rows kept under the looser id rule of earlier versions
(a user id with "/" or a control character) can be named by no path, so these routes
take the ids in a body, as the rows hold them, to list and to erase them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter
from pydantic import Field

from memoryd.memories.erasure import ErasureOut
from memoryd.models.schemas import MAX_PAGE, StoredId
from memoryd.models.tables import MemoryStatus
from memoryd.server.auth import Caller, check_scope
from memoryd.server.routes.scopes import erased
from memoryd.server.schemas import MemoryList, Strict
from memoryd.server.state import State
from memoryd.server.strict import JsonRoute

router = APIRouter(prefix="/v1/stored-scopes", tags=["erasure"], route_class=JsonRoute)


class StoredScope(Strict):
    """A scope's ids exactly as its rows hold them: not stripped, any character."""

    agent_id: StoredId
    user_id: StoredId


class StoredPage(StoredScope):
    limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = 50
    offset: Annotated[int, Field(ge=0, le=1_000_000)] = 0


@router.post(
    "/memories",
    response_model=MemoryList,
    summary="A scope's active memories, newest first, its ids as stored",
)
def list_stored(state: State, principal: Caller, body: StoredPage) -> MemoryList:
    check_scope(principal, body.agent_id, body.user_id, write=False)
    memories = state.client.list(
        body.agent_id,
        body.user_id,
        statuses=[MemoryStatus.ACTIVE],
        limit=body.limit,
        offset=body.offset,
    )
    return MemoryList(memories=memories)


@router.post(
    "/erase",
    response_model=ErasureOut,
    summary="Erase a user named by its ids as stored (not undoable)",
)
def erase_stored(state: State, principal: Caller, body: StoredScope) -> ErasureOut:
    return erased(state, principal, body.agent_id, body.user_id)
