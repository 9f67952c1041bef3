"""The direct memory API: list, get, create, update, delete, restore, history."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from memoryd.models.schemas import MAX_PAGE, EventOut, MemoryOut
from memoryd.models.tables import SHARED_USER, Category, MemoryStatus, Tier
from memoryd.recall.as_of import Moment
from memoryd.server.auth import Caller, check_scope
from memoryd.server.schemas import (
    AgentPath,
    HistoryAfter,
    HistoryLimit,
    MemoryCreate,
    MemoryIdPath,
    MemoryList,
    MemoryUpdate,
    UserPath,
)
from memoryd.server.state import State
from memoryd.server.strict import JsonRoute

LIST_AS_OF = (
    "with a timezone: the memories as they stood at that moment, each with the status and "
    "text it had then (`status` filters on that status)"
)

router = APIRouter(
    prefix="/v1/memories/{agent_id}/{user_id}", tags=["memories"], route_class=JsonRoute
)


@router.get("", response_model=MemoryList, summary="A scope's memories, newest first")
def list_memories(
    state: State,
    principal: Caller,
    agent_id: AgentPath,
    user_id: UserPath,
    status: Annotated[list[MemoryStatus] | None, Query()] = None,
    category: Annotated[list[Category] | None, Query()] = None,
    tier: Annotated[list[Tier] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    as_of: Annotated[Moment | None, Query(description=LIST_AS_OF)] = None,
) -> MemoryList:
    check_scope(principal, agent_id, user_id, write=False)
    memories = state.client.list(
        agent_id,
        user_id,
        statuses=status or [MemoryStatus.ACTIVE],
        categories=category,
        tiers=tier,
        limit=limit,
        offset=offset,
        as_of=as_of,
    )
    return MemoryList(memories=memories)


@router.post(
    "",
    status_code=201,
    response_model=MemoryOut,
    summary="Remember something now",
    responses={
        201: {"description": "A new memory"},
        200: {"model": MemoryOut, "description": "Already remembered: that memory, confirmed"},
    },
)
def create_memory(
    state: State,
    principal: Caller,
    agent_id: AgentPath,
    user_id: UserPath,
    body: MemoryCreate,
    response: Response,
) -> MemoryOut:
    check_scope(principal, agent_id, user_id, write=True)
    saved, created = state.client.save(
        agent_id,
        user_id,
        body.content,
        category=body.category,
        name=body.name,
        tags=body.tags,
        replaces=body.replaces,
        shared=user_id == SHARED_USER,  # the path names the shared scope: explicit enough
    )
    if not created:
        response.status_code = 200
    return saved


@router.get("/{memory_id}", response_model=MemoryOut, summary="One memory")
def get_memory(
    state: State, principal: Caller, agent_id: AgentPath, user_id: UserPath, memory_id: MemoryIdPath
) -> MemoryOut:
    check_scope(principal, agent_id, user_id, write=False)
    return state.client.get(agent_id, user_id, memory_id)


@router.patch("/{memory_id}", response_model=MemoryOut, summary="Edit a memory")
def update_memory(
    state: State,
    principal: Caller,
    agent_id: AgentPath,
    user_id: UserPath,
    memory_id: MemoryIdPath,
    body: MemoryUpdate,
) -> MemoryOut:
    check_scope(principal, agent_id, user_id, write=True)
    return state.client.update(
        agent_id,
        user_id,
        memory_id,
        content=body.content,
        name=body.name,
        category=body.category,
        tags=body.tags,
        shared=user_id == SHARED_USER,
    )


@router.delete("/{memory_id}", response_model=MemoryOut, summary="Soft-delete (restorable)")
def delete_memory(
    state: State, principal: Caller, agent_id: AgentPath, user_id: UserPath, memory_id: MemoryIdPath
) -> MemoryOut:
    check_scope(principal, agent_id, user_id, write=True)
    return state.client.forget(agent_id, user_id, memory_id, shared=user_id == SHARED_USER)


@router.post("/{memory_id}/restore", response_model=MemoryOut, summary="Bring a memory back")
def restore_memory(
    state: State, principal: Caller, agent_id: AgentPath, user_id: UserPath, memory_id: MemoryIdPath
) -> MemoryOut:
    check_scope(principal, agent_id, user_id, write=True)
    return state.client.restore(agent_id, user_id, memory_id, shared=user_id == SHARED_USER)


@router.get(
    "/{memory_id}/history",
    response_model=list[EventOut],
    summary="A memory's history, oldest first, a page at a time",
)
def memory_history(
    state: State,
    principal: Caller,
    agent_id: AgentPath,
    user_id: UserPath,
    memory_id: MemoryIdPath,
    after: HistoryAfter = 0,
    limit: HistoryLimit = MAX_PAGE,
) -> list[EventOut]:
    check_scope(principal, agent_id, user_id, write=False)
    return state.client.history(agent_id, user_id, memory_id, after=after, limit=limit)
