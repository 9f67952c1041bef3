"""A key can never read or write another agent's (or, bound to a user, another user's)
scopes: a property over random keys, target scopes and endpoints, on both databases."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from memoryd.memories.edits import remember
from memoryd.models.db import session_scope, utcnow
from memoryd.models.keys import Scope
from memoryd.models.tables import AgentConfig, Memory, MemoryEvent, ProfileEvent, Turn
from memoryd.settings import Settings
from tests.factories import turn_item
from tests.server.conftest import bearer, make_key

AGENTS = ["a1", "a2", "a3"]
USERS = ["u1", "u2"]

# (method, path, body); {a} {u} {id} are the target scope and a memory of it.
ENDPOINTS: list[tuple[str, str, Any]] = [
    ("POST", "/v1/turns", lambda a, u: turn_item(agent_id=a, user_id=u)),
    ("POST", "/v1/sessions/{a}/{u}/s1/end", None),
    ("GET", "/v1/sessions/{a}/{u}/s1/context", None),
    ("POST", "/v1/recall", lambda a, u: {"agent_id": a, "user_id": u, "query": "tea"}),
    ("POST", "/v1/context", lambda a, u: {"agent_id": a, "user_id": u, "query": "tea"}),
    ("GET", "/v1/memories/{a}/{u}", None),
    ("POST", "/v1/memories/{a}/{u}", lambda a, u: {"content": "Likes coffee"}),
    ("GET", "/v1/memories/{a}/{u}/{id}", None),
    ("PATCH", "/v1/memories/{a}/{u}/{id}", lambda a, u: {"content": "Hates tea"}),
    ("DELETE", "/v1/memories/{a}/{u}/{id}", None),
    ("POST", "/v1/memories/{a}/{u}/{id}/restore", None),
    ("GET", "/v1/memories/{a}/{u}/{id}/history", None),
    ("DELETE", "/v1/scopes/{a}/{u}/sessions/s1", None),
    ("DELETE", "/v1/scopes/{a}/{u}", None),
    ("GET", "/v1/agents/{a}/settings", None),
    ("PUT", "/v1/agents/{a}/settings", lambda a, u: {"prefetch_limit": 1}),
    ("GET", "/v1/dead-letters?agent_id={a}&user_id={u}", None),
    ("POST", "/v1/dead-letters/retry", lambda a, u: {"agent_id": a, "user_id": u}),
    ("GET", "/v1/profiles/{a}/{u}/user", None),
    ("PATCH", "/v1/profiles/{a}/{u}/work", lambda a, u: {"content": {"team_context": "x"}}),
    ("PUT", "/v1/profiles/{a}/{u}/user", lambda a, u: {"content": {"timezone": "UTC"}}),
    ("GET", "/v1/profiles/{a}/{u}/user/history", None),
    ("GET", "/api/v1/memories?agent_id={a}&user_id={u}", None),
    (
        "PATCH",
        "/api/v1/memories/user?agent_id={a}&user_id={u}",
        lambda a, u: {"content": {"occupation": "x"}},
    ),
]


def snapshot(settings: Settings) -> tuple[Any, ...]:
    """Everything a request could have changed."""
    with session_scope(settings.storage, readonly=True) as session:
        memories = session.execute(
            select(Memory.id, Memory.status, Memory.content, Memory.access_count).order_by(
                Memory.id
            )
        ).all()
        counts = [
            session.scalar(select(func.count()).select_from(table))
            for table in (Turn, MemoryEvent, AgentConfig, ProfileEvent)
        ]
    return (tuple(memories), *counts)


@given(
    key_agents=st.sets(st.sampled_from(AGENTS), min_size=1, max_size=2),
    key_user=st.sampled_from([None, *USERS]),
    target=st.tuples(st.sampled_from(AGENTS), st.sampled_from(USERS)),
    endpoint=st.sampled_from(ENDPOINTS),
)
@hypothesis_settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_a_key_never_reaches_a_scope_it_is_not_bound_to(
    api: TestClient,
    api_settings: Settings,
    key_agents: set[str],
    key_user: str | None,
    target: tuple[str, str],
    endpoint: tuple[str, str, Any],
) -> None:
    agent, user = target
    with session_scope(api_settings.storage) as session:
        memory, _ = remember(session, api_settings, Scope(agent, user), "Prefers tea", utcnow())
    key = make_key(api_settings, "random", agent_ids=sorted(key_agents), user_id=key_user)
    method, path, body = endpoint
    url = path.format(a=agent, u=user, id=memory.id)
    allowed = agent in key_agents and key_user in (None, user)
    if path.startswith("/v1/agents/"):  # agent-wide: any key of the agent may read them,
        allowed = agent in key_agents and (method == "GET" or key_user is None)  # not change

    before = snapshot(api_settings)
    response = api.request(
        method, url, json=body(agent, user) if body else None, headers=bearer(key)
    )
    if allowed:
        assert response.status_code != 403, response.text
    else:
        assert response.status_code == 403, (url, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        assert snapshot(api_settings) == before
