"""Write side over HTTP: turns in, sessions ended."""

from __future__ import annotations

import threading
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query, Response

from memoryd.async_client import in_thread
from memoryd.ingest.buffer import payload_items
from memoryd.ingest.receipts import TurnReceipt
from memoryd.models.schemas import IngestResult, TurnKey
from memoryd.server import metrics
from memoryd.server.auth import Caller, check_scope
from memoryd.server.keys import Principal
from memoryd.server.problems import FieldError, ProblemError
from memoryd.server.schemas import AgentPath, SessionEnded, SessionPath, UserPath
from memoryd.server.state import State
from memoryd.server.strict import JsonRoute

router = APIRouter(tags=["turns"], route_class=JsonRoute)

TURNS_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "oneOf": [
                        {"$ref": "#/components/schemas/TurnsRequest"},
                        {"$ref": "#/components/schemas/TurnIn"},
                    ]
                }
            }
        },
    }
}


def _check_items(principal: Principal, items: list[Any]) -> None:
    """Every item's scope before anything is stored: one foreign item refuses the call."""
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            continue  # validation reports it
        agent, user = item.get("agent_id"), item.get("user_id")
        named = isinstance(agent, str) and isinstance(user, str)
        if named and not principal.may_write(str(agent).strip(), str(user).strip()):
            raise ProblemError(
                403,
                "forbidden",
                f"turns[{index}]: this key may not write agent {agent!r}, user {user!r}",
                [FieldError(field=f"turns[{index}].agent_id", message="not this key's scope")],
            )


@router.post(
    "/v1/turns",
    status_code=202,
    response_model=IngestResult,
    openapi_extra=TURNS_BODY,
    summary="Store dialogue turns (one or many) for extraction",
)
async def post_turns(
    state: State, principal: Caller, payload: Annotated[Any, Body()] = None
) -> Response:
    """Per item, like `enqueue_turns`: every valid item is stored, each invalid one is
    listed in `rejected` with its fields. A call in which no item was valid is a 422."""
    # The ingest hot path: the store runs in the server's own threads (asyncio's hop,
    # lighter than FastAPI's for a plain function), and the answer is the model's own
    # JSON (response_model documents it; validating it again costs more than the insert).
    items = payload_items(payload)
    _check_items(principal, items)
    result = await in_thread(state.pool, partial(state.client.enqueue_turns, items))
    metrics.count_ingest(result)
    if result.rejected and not (result.accepted or result.duplicates):
        errors = [
            FieldError(field=f"turns[{r['index']}].{e['field']}".rstrip("."), message=e["message"])
            for r in result.rejected
            for e in r["errors"]
        ]
        raise ProblemError(
            422, "invalid-request", f"{errors[0].field}: {errors[0].message}", errors
        )
    return Response(result.model_dump_json(), 202, media_type="application/json")


@router.post(
    "/v1/sessions/{agent_id}/{user_id}/{session_id}/end",
    response_model=SessionEnded,
    summary="End a session: extract its remaining turns now",
)
def end_session(
    state: State,
    principal: Caller,
    agent_id: AgentPath,
    user_id: UserPath,
    session_id: SessionPath,
) -> SessionEnded:
    check_scope(principal, agent_id, user_id, write=True)
    if not state.client.end_session(agent_id, user_id, session_id):
        raise ProblemError(404, "not-found", f"no session {session_id!r} for that scope")
    return SessionEnded(ended=True)


# The last segment takes any key a body may give, "/" included.
TurnKeyPath = Annotated[TurnKey, Path()]
MAX_WAIT_SECONDS = 30.0
WAITERS = 8  # requests that may wait at once, of the 40 threads sync routes run on
_WAITERS = threading.BoundedSemaphore(WAITERS)


@router.get(
    "/v1/turns/{agent_id}/{user_id}/{turn_key:path}",
    response_model=TurnReceipt,
    summary="Where a turn stands (pending, claimed, done, failed, skipped) and its memories",
)
def get_turn_status(
    state: State,
    principal: Caller,
    agent_id: AgentPath,
    user_id: UserPath,
    turn_key: TurnKeyPath,
    wait: Annotated[
        float,
        Query(ge=0, le=MAX_WAIT_SECONDS, description="Seconds to wait for the turn to settle"),
    ] = 0.0,
) -> TurnReceipt:
    """The write receipt of the turn stored with this `turn_key`. With `wait`, the answer
    comes once the turn is done, failed or skipped, or when `wait` seconds have passed
    (then as it stands: check `status`). While WAITERS requests wait, others are answered
    at once."""
    check_scope(principal, agent_id, user_id, write=False)
    # Each waiter holds one of the server's threads: past WAITERS at once, no waiting.
    waiting = wait > 0 and _WAITERS.acquire(blocking=False)
    try:
        timeout = wait if waiting else 0.0
        found = state.client.wait_extracted(agent_id, user_id, [turn_key], timeout=timeout)
    finally:
        if waiting:
            _WAITERS.release()
    if not found:
        raise ProblemError(404, "not-found", f"no turn with turn_key {turn_key!r} in that scope")
    return found[0]
