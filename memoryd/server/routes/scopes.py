"""Erasure: every row of a scope, or of one of its sessions, removed from every table."""

from __future__ import annotations

from fastapi import APIRouter

from memoryd.memories.erasure import ErasureOut
from memoryd.models.tables import SHARED_USER
from memoryd.server.auth import Caller, check_scope
from memoryd.server.keys import Principal
from memoryd.server.problems import ProblemError
from memoryd.server.schemas import AgentPath, SessionPath, UserPath
from memoryd.server.state import ServerState, State
from memoryd.server.strict import JsonRoute

router = APIRouter(
    prefix="/v1/scopes/{agent_id}/{user_id}", tags=["erasure"], route_class=JsonRoute
)

DONE = "Erased; the audit row's `rows` counts what went, per table"


@router.delete(
    "",
    response_model=ErasureOut,
    summary="Erase a user: turns, sessions, memories, usage, profiles, batches (not undoable)",
    responses={200: {"description": DONE}},
)
def erase_scope(
    state: State, principal: Caller, agent_id: AgentPath, user_id: UserPath
) -> ErasureOut:
    return erased(state, principal, agent_id, user_id)


def erased(state: ServerState, principal: Principal, agent_id: str, user_id: str) -> ErasureOut:
    """The scope erased for a key that may write it."""
    check_scope(principal, agent_id, user_id, write=True)
    if user_id == SHARED_USER and not principal.admin:  # every user's shared workspace
        raise ProblemError(403, "forbidden", "erasing the shared `*` scope takes an admin key")
    return state.client.erase(agent_id, user_id, actor=f"key {principal.name}")


@router.delete(
    "/sessions/{session_id}",
    response_model=ErasureOut,
    summary="Erase one session: its turns, summaries, batches, usage and the memories"
    " learnt from it (not undoable)",
    responses={200: {"description": DONE}},
)
def erase_session(
    state: State,
    principal: Caller,
    agent_id: AgentPath,
    user_id: UserPath,
    session_id: SessionPath,
) -> ErasureOut:
    check_scope(principal, agent_id, user_id, write=True)
    return state.client.erase(agent_id, user_id, session_id, actor=f"key {principal.name}")
