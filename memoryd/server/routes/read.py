"""Read side over HTTP: ranked recall, the context block, a session's context."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from memoryd.server import metrics
from memoryd.server.auth import Caller, check_scope
from memoryd.server.schemas import (
    AgentPath,
    ContextOut,
    ContextRequest,
    RecallOut,
    RecallRequest,
    SessionContextOut,
    SessionPath,
    UserPath,
)
from memoryd.server.state import State
from memoryd.server.strict import JsonRoute

router = APIRouter(tags=["read"], route_class=JsonRoute)


@router.post("/v1/recall", response_model=RecallOut, summary="Ranked memories for a query")
def post_recall(state: State, principal: Caller, body: RecallRequest) -> RecallOut:
    check_scope(principal, body.agent_id, body.user_id, write=False)
    with metrics.RECALL_SECONDS.labels("recall").time():
        hits = state.client.recall(
            body.query,
            body.agent_id,
            body.user_id,
            k=body.k,
            categories=body.categories,
            tiers=body.tiers,
            session_id=body.session_id,
            as_of=body.as_of,
        )
    return RecallOut(memories=hits)


@router.post(
    "/v1/context", response_model=ContextOut, summary="The <memory-context> block for a prompt"
)
def post_context(state: State, principal: Caller, body: ContextRequest) -> ContextOut:
    check_scope(principal, body.agent_id, body.user_id, write=False)
    with metrics.RECALL_SECONDS.labels("context").time():
        block = state.client.build_context(
            body.query,
            body.agent_id,
            body.user_id,
            token_budget=body.token_budget,
            session_id=body.session_id,
            as_of=body.as_of,
        )
    return ContextOut(context=block)


@router.get(
    "/v1/sessions/{agent_id}/{user_id}/{session_id}/context",
    response_model=SessionContextOut,
    summary="A session's synopsis plus its newest turns, within a token budget",
)
def get_session_context(
    state: State,
    principal: Caller,
    agent_id: AgentPath,
    user_id: UserPath,
    session_id: SessionPath,
    token_budget: Annotated[int, Query(ge=1, le=100_000)] = 2000,
) -> SessionContextOut:
    check_scope(principal, agent_id, user_id, write=False)
    context = state.client.session_context(agent_id, user_id, session_id, token_budget)
    return SessionContextOut(**context.model_dump(), text=context.as_text())
