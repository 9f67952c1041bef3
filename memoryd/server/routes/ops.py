"""Operations: liveness, pipeline figures, batches, dead letters and their retry."""

from __future__ import annotations

import logging
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from memoryd.errors import error_text
from memoryd.extraction.stats import pipeline_stats
from memoryd.ingest.sweeper import purge_failed, retry_failed, skip_failed
from memoryd.memories.health import memory_health
from memoryd.models.db import get_engine, session_scope, utcnow
from memoryd.models.schemas import MAX_PAGE, Ident
from memoryd.models.tables import BatchStatus
from memoryd.monitoring.figures import BatchOut, DeadLetter, dead_letters, list_batches
from memoryd.server.auth import Admin, Caller, check_scope
from memoryd.server.keys import Principal
from memoryd.server.problems import ProblemError
from memoryd.server.schemas import (
    MAX_ID,
    HealthOut,
    PurgeOut,
    RetryOut,
    RetryRequest,
    SkipOut,
    StatsOut,
)
from memoryd.server.state import State
from memoryd.server.strict import JsonRoute

log = logging.getLogger(__name__)
router = APIRouter(tags=["operations"], route_class=JsonRoute)

AgentQuery = Annotated[Ident | None, Query()]
# What may be done with dead letters: re-drive them, give up on them, or delete them.
DeadLetterAction = Literal["retry", "skip", "purge"]


@router.get(
    "/v1/health",
    response_model=HealthOut,
    responses={503: {"model": HealthOut}},
    summary="Liveness and database reachability (no key needed)",
)
def health(state: State) -> HealthOut | JSONResponse:
    try:
        with get_engine(state.settings.storage).connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        # A keyless caller learns up or down; the reason goes to the server's log only.
        log.warning("health: the database is unavailable: %s", error_text(exc))
        body = HealthOut(status="unavailable", database="unavailable")
        return JSONResponse(body.model_dump(), status_code=503)
    return HealthOut(status="ok", database="ok")


@router.get("/v1/stats", response_model=StatsOut, summary="Pipeline figures and memory health")
def stats(state: State, _admin: Admin) -> StatsOut:
    with session_scope(state.settings.storage, readonly=True) as session:
        health = memory_health(session, utcnow())
    return StatsOut(pipeline=pipeline_stats(state.settings), health=health.model_dump(mode="json"))


@router.get(
    "/v1/batches", response_model=list[BatchOut], summary="Extraction batches, newest first"
)
def batches(
    state: State,
    _admin: Admin,
    status: Annotated[BatchStatus | None, Query()] = None,
    agent_id: AgentQuery = None,
    before_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
) -> list[BatchOut]:
    with session_scope(state.settings.storage, readonly=True) as session:
        return list_batches(
            session, status=status, agent_id=agent_id, before_id=before_id, limit=limit
        )


@router.get("/v1/dead-letters", response_model=list[DeadLetter], summary="Dead-lettered turns")
def list_dead_letters(
    state: State,
    principal: Caller,
    agent_id: AgentQuery = None,
    user_id: AgentQuery = None,
    session_id: AgentQuery = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
) -> list[DeadLetter]:
    _check_filter(principal, agent_id, user_id)
    with session_scope(state.settings.storage, readonly=True) as session:
        return dead_letters(
            session, agent_id=agent_id, user_id=user_id, session_id=session_id, limit=limit
        )


@router.post(
    "/v1/dead-letters/retry",
    response_model=RetryOut,
    summary="Re-drive dead-lettered turns (of an agent, user or session, or all)",
)
def retry_dead_letters(state: State, principal: Caller, body: RetryRequest) -> RetryOut:
    return RetryOut(retried=_settle(state, principal, body, "retry"))


@router.post(
    "/v1/dead-letters/skip",
    response_model=SkipOut,
    summary="Give up on dead-lettered turns: kept as history, never extracted",
)
def skip_dead_letters(state: State, principal: Caller, body: RetryRequest) -> SkipOut:
    return SkipOut(skipped=_settle(state, principal, body, "skip"))


@router.post(
    "/v1/dead-letters/purge",
    response_model=PurgeOut,
    summary="Delete dead-lettered turns, text and all",
)
def purge_dead_letters(state: State, principal: Caller, body: RetryRequest) -> PurgeOut:
    return PurgeOut(purged=_settle(state, principal, body, "purge"))


def settle_failed(
    session: Session,
    action: DeadLetterAction,
    *,
    agent_id: str | None,
    user_id: str | None,
    session_id: str | None,
) -> int:
    """Retry, skip or purge the dead letters of an agent, user or session (None: any).
    The API and the page both settle through here. Returns how many."""
    which = {"agent_id": agent_id, "user_id": user_id, "session_id": session_id}
    if action == "retry":
        return retry_failed(session, utcnow(), **which)
    if action == "skip":
        return skip_failed(session, **which)
    return purge_failed(session, **which)


def _settle(
    state: State, principal: Principal, body: RetryRequest, action: DeadLetterAction
) -> int:
    """The key's right to these dead letters checked, then one transaction settles them."""
    _check_filter(principal, body.agent_id, body.user_id)
    with session_scope(state.settings.storage) as session:
        return settle_failed(
            session,
            action,
            agent_id=body.agent_id,
            user_id=body.user_id,
            session_id=body.session_id,
        )


def _check_filter(principal: Principal, agent_id: str | None, user_id: str | None) -> None:
    """Admins may look at every dead letter; other keys name one of their agents."""
    if principal.admin:
        return
    if agent_id is None:
        raise ProblemError(403, "forbidden", "name an agent_id of this key (or use an admin key)")
    if principal.user_id is not None and user_id is None:
        raise ProblemError(403, "forbidden", "this key is bound to one user: name its user_id")
    check_scope(principal, agent_id, user_id, write=False)
