"""Profiles over HTTP: seed 001's paths for the key's own user, and the same per scope.

Seed 001 names no scope in its paths (`/api/v1/memories/user`): they serve the user the
key is bound to. A key bound to several agents or to no user says which scope with
`?agent_id=&user_id=`. The per-scope paths (`/v1/profiles/{agent}/{user}/{type}`) also
give the version, the per-field meta and the history. Writing the agent's shared `*`
scope takes a key allowed to (not one bound to a single user).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from memoryd.models.profiles import (
    ProfileEventOut,
    ProfileOut,
    ProfileType,
    UserMemoryContent,
    WorkProfileContent,
)
from memoryd.models.schemas import MAX_PAGE, Ident
from memoryd.models.tables import SHARED_USER
from memoryd.server import profile_docs
from memoryd.server.auth import Caller, check_scope
from memoryd.server.keys import Principal
from memoryd.server.problems import ProblemError
from memoryd.server.schemas import AgentPath, HistoryAfter, HistoryLimit, Strict, UserPath
from memoryd.server.state import State
from memoryd.server.strict import JsonRoute

router = APIRouter(tags=["profiles"], route_class=JsonRoute)

ScopeQuery = Annotated[Ident | None, Query()]
# How a document changes: PUT replaces it, PATCH merges into it (RFC 7396).
Change = Literal["PUT", "PATCH"]


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

    _seed_change(path, kind, model, "PUT", f"Replace the {kind.value} profile")
    _seed_change(path, kind, model, "PATCH", f"Merge-patch the {kind.value} profile")


def _seed_change(
    path: str,
    kind: ProfileType,
    model: type[UserMemoryContent] | type[WorkProfileContent],
    method: Change,
    summary: str,
) -> None:
    """Seed 001's PUT (replace) or PATCH (merge-patch): one handler for both, so that
    they cannot drift apart; the route keeps its name, put_ or patch_document."""

    @router.api_route(
        path,
        methods=[method],
        name=f"{method.lower()}_document",  # the OpenAPI operationId starts with it
        response_model=model,
        summary=summary,
        openapi_extra=profile_docs.request_body(profile_docs.body_model(kind, method)),
    )
    def change_document(
        state: State,
        principal: Caller,
        body: ProfileBody,
        agent_id: ScopeQuery = None,
        user_id: ScopeQuery = None,
    ) -> Any:
        agent, user = _own_scope(principal, agent_id, user_id)
        return _write(state, principal, agent, user, kind, body, patch=method == "PATCH").content


_seed_routes(ProfileType.USER, UserMemoryContent)
_seed_routes(ProfileType.WORK, WorkProfileContent)


# -------------------------------------------------------------------- per-scope paths
# One path per profile type, so the document types each one's content; a path naming
# no type reaches the generic routes below, left out of the document, which refuse it
# with 422 naming `kind` as before.

SCOPED = "/v1/profiles/{agent_id}/{user_id}/{kind}"


def _scoped_routes(kind: ProfileType) -> None:
    path = SCOPED.replace("{kind}", kind.value)
    typed: dict[int | str, dict[str, Any]] = {200: {"model": profile_docs.out_model(kind)}}

    @router.get(
        path,
        name=f"get_{kind.value}_profile",
        response_model=ProfileOut,
        responses=typed,
        summary=f"The {kind.value} profile with its version and meta",
    )
    def get_profile(
        state: State, principal: Caller, agent_id: AgentPath, user_id: UserPath
    ) -> ProfileOut:
        return _read(state, principal, agent_id, user_id, kind)

    changes: list[tuple[Change, str]] = [("PUT", "Replace"), ("PATCH", "Merge-patch (RFC 7396)")]
    for method, summary in changes:
        _scoped_change(path, kind, method, f"{summary} the {kind.value} profile")

    @router.get(
        f"{path}/history",
        name=f"{kind.value}_profile_history",
        response_model=list[ProfileEventOut],
        summary=f"The changes of the {kind.value} profile, oldest first, a page at a time",
    )
    def profile_history(
        state: State,
        principal: Caller,
        agent_id: AgentPath,
        user_id: UserPath,
        after: HistoryAfter = 0,
        limit: HistoryLimit = MAX_PAGE,
    ) -> list[ProfileEventOut]:
        check_scope(principal, agent_id, user_id, write=False)
        return state.client.profile_history(agent_id, user_id, kind, after=after, limit=limit)


def _scoped_change(path: str, kind: ProfileType, method: Change, summary: str) -> None:
    """PUT (replace) or PATCH (merge-patch) of a scope's profile, as _seed_change."""
    typed: dict[int | str, dict[str, Any]] = {200: {"model": profile_docs.out_model(kind)}}

    @router.api_route(
        path,
        methods=[method],
        name=f"{method.lower()}_{kind.value}_profile",
        response_model=ProfileOut,
        responses=typed,
        summary=summary,
        openapi_extra=profile_docs.request_body(profile_docs.body_model(kind, method)),
    )
    def change_profile(
        state: State, principal: Caller, agent_id: AgentPath, user_id: UserPath, body: ProfileBody
    ) -> ProfileOut:
        return _write(state, principal, agent_id, user_id, kind, body, patch=method == "PATCH")


for _kind in ProfileType:
    _scoped_routes(_kind)


@router.api_route(SCOPED, methods=["GET", "PUT", "PATCH"], include_in_schema=False)
@router.get(f"{SCOPED}/history", include_in_schema=False)
def unknown_kind(
    principal: Caller, agent_id: AgentPath, user_id: UserPath, kind: ProfileType
) -> None:
    """Reached only when `kind` names no profile type, which its validation refuses."""
    raise AssertionError(f"no route for profile type {kind}")
