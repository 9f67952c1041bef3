"""Per-agent memory settings over HTTP (seed 000 §8)."""

from __future__ import annotations

from fastapi import APIRouter

from memoryd.agents import config
from memoryd.agents.config import AgentSettings, AgentSettingsOut
from memoryd.models.db import session_scope, utcnow
from memoryd.server.auth import Caller, check_scope
from memoryd.server.problems import ProblemError
from memoryd.server.schemas import AgentPath
from memoryd.server.state import State
from memoryd.server.strict import JsonRoute

router = APIRouter(prefix="/v1/agents/{agent_id}/settings", tags=["agents"], route_class=JsonRoute)


@router.get("", response_model=AgentSettingsOut, summary="An agent's memory settings")
def get_settings(state: State, principal: Caller, agent_id: AgentPath) -> AgentSettingsOut:
    check_scope(principal, agent_id, None, write=False)
    with session_scope(state.settings.storage, readonly=True) as session:
        return config.describe(session, state.settings, agent_id)


@router.put("", response_model=AgentSettingsOut, summary="Replace an agent's overrides")
def put_settings(
    state: State, principal: Caller, agent_id: AgentPath, body: AgentSettings
) -> AgentSettingsOut:
    check_scope(principal, agent_id, None, write=False)
    if principal.user_id is not None and not principal.admin:
        raise ProblemError(403, "forbidden", "a key bound to one user may not change its agent")
    with session_scope(state.settings.storage) as session:
        config.put(session, agent_id, body, utcnow())
        return config.describe(session, state.settings, agent_id)
