"""Profiles over HTTP: seed 001's paths for the key's own user, and the same per scope.

Seed 001 names no scope in its paths (`/api/v1/memories/user`): they serve the user the
key is bound to. A key bound to several agents or to no user says which scope with
`?agent_id=&user_id=`. The per-scope paths (`/v1/profiles/{agent}/{user}/{type}`) also
give the version, the per-field meta and the history. Writing the agent's shared `*`
scope takes a key allowed to (not one bound to a single user).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from memoryd.models.profiles import (
    ProfileEventOut,
    ProfileOut,
    ProfileType,
    UserMemoryContent,
    WorkProfileContent,
)
from memoryd.models.tables import SHARED_USER
from memoryd.server.auth import Caller, check_scope
from memoryd.server.keys import Principal
from memoryd.server.problems import ProblemError
from memoryd.server.schemas import IDENT_PATTERN, AgentPath, Strict, UserPath
from memoryd.server.state import State

router = APIRouter(tags=["profiles"])

ScopeQuery = Annotated[str | None, Query(min_length=1, max_length=200, pattern=IDENT_PATTERN)]


class ProfileBody(Strict):
    """Seed 001's PUT and PATCH body. PATCH applies `content` as a JSON Merge Patch
    (RFC 7396): objects merge, null removes a field, a list replaces the list."""

    content: dict[str, Any] = Field(json_schema_extra={"maxProperties": 50})


class Profiles(BaseModel):
    """Seed 001's `GET /api/v1/memories`."""

    user_memory: UserMemoryContent
    work_memory: WorkProfileContent


def _own_scope(principal: Principal, agent_id: str | None, user_id: str | None) -> tuple[str, str]:
    agent = agent_id or (next(iter(principal.agent_ids)) if len(principal.agent_ids) == 1 else None)
    user = user_id or principal.user_id
    if agent is None or user is None:
        raise ProblemError(
            400,
            "scope-needed",
            "this key is not bound to one agent and one user: add ?agent_id=…&user_id=…",
        )
    return agent, user


def _read(
    state: State, principal: Principal, agent: str, user: str, kind: ProfileType
) -> ProfileOut:
    check_scope(principal, agent, user, write=False)
    return state.client.profile(agent, user, kind)


def _write(
    state: State,
    principal: Principal,
    agent: str,
    user: str,
    kind: ProfileType,
    body: ProfileBody,
    *,
    patch: bool,
) -> ProfileOut:
    check_scope(principal, agent, user, write=True)
    change = state.client.patch_profile if patch else state.client.put_profile
    return change(agent, user, kind, body.content, shared=user == SHARED_USER)


# ------------------------------------------------------------------ seed 001's paths


@router.get("/api/v1/memories", response_model=Profiles, summary="Both profile documents")
def get_profiles(
    state: State, principal: Caller, agent_id: ScopeQuery = None, user_id: ScopeQuery = None
) -> Profiles:
    agent, user = _own_scope(principal, agent_id, user_id)
    return Profiles(
        user_memory=UserMemoryContent.model_validate(
            _read(state, principal, agent, user, ProfileType.USER).content
        ),
        work_memory=WorkProfileContent.model_validate(
            _read(state, principal, agent, user, ProfileType.WORK).content
        ),
    )


def _seed_routes(
    kind: ProfileType, model: type[UserMemoryContent] | type[WorkProfileContent]
) -> None:
    path = f"/api/v1/memories/{kind.value}"

    @router.get(path, response_model=model, summary=f"The {kind.value} profile document")
    def get_document(
        state: State, principal: Caller, agent_id: ScopeQuery = None, user_id: ScopeQuery = None
    ) -> Any:
        agent, user = _own_scope(principal, agent_id, user_id)
        return _read(state, principal, agent, user, kind).content

    @router.put(path, response_model=model, summary=f"Replace the {kind.value} profile")
    def put_document(
        state: State,
        principal: Caller,
        body: ProfileBody,
        agent_id: ScopeQuery = None,
        user_id: ScopeQuery = None,
    ) -> Any:
        agent, user = _own_scope(principal, agent_id, user_id)
        return _write(state, principal, agent, user, kind, body, patch=False).content

    @router.patch(path, response_model=model, summary=f"Merge-patch the {kind.value} profile")
    def patch_document(
        state: State,
        principal: Caller,
        body: ProfileBody,
        agent_id: ScopeQuery = None,
        user_id: ScopeQuery = None,
    ) -> Any:
        agent, user = _own_scope(principal, agent_id, user_id)
        return _write(state, principal, agent, user, kind, body, patch=True).content


_seed_routes(ProfileType.USER, UserMemoryContent)
_seed_routes(ProfileType.WORK, WorkProfileContent)


# -------------------------------------------------------------------- per-scope paths

SCOPED = "/v1/profiles/{agent_id}/{user_id}/{kind}"


@router.get(SCOPED, response_model=ProfileOut, summary="A profile with its version and meta")
def get_profile(
    state: State, principal: Caller, agent_id: AgentPath, user_id: UserPath, kind: ProfileType
) -> ProfileOut:
    return _read(state, principal, agent_id, user_id, kind)


@router.put(SCOPED, response_model=ProfileOut, summary="Replace a profile document")
def put_profile(
    state: State,
    principal: Caller,
    agent_id: AgentPath,
    user_id: UserPath,
    kind: ProfileType,
    body: ProfileBody,
) -> ProfileOut:
    return _write(state, principal, agent_id, user_id, kind, body, patch=False)


@router.patch(SCOPED, response_model=ProfileOut, summary="Merge-patch a profile (RFC 7396)")
def patch_profile(
    state: State,
    principal: Caller,
    agent_id: AgentPath,
    user_id: UserPath,
    kind: ProfileType,
    body: ProfileBody,
) -> ProfileOut:
    return _write(state, principal, agent_id, user_id, kind, body, patch=True)


@router.get(
    f"{SCOPED}/history", response_model=list[ProfileEventOut], summary="Every change, oldest first"
)
def profile_history(
    state: State, principal: Caller, agent_id: AgentPath, user_id: UserPath, kind: ProfileType
) -> list[ProfileEventOut]:
    check_scope(principal, agent_id, user_id, write=False)
    return state.client.profile_history(agent_id, user_id, kind)
