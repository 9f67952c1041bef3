"""The page's profiles screen: a scope's two documents (seed 001), as JSON to edit and as
the agent's prompt will show them."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError

from memoryd.errors import ProfileRejected
from memoryd.memories.erasure import EraseRequest
from memoryd.models.profiles import ProfileType
from memoryd.models.tables import SHARED_USER
from memoryd.server.page.render import Page, PageAdmin
from memoryd.server.state import State

router = APIRouter()

ScopeText = Annotated[str, Query(max_length=200)]
FormText = Annotated[str, Form(max_length=200)]


@router.get("/profiles", response_class=HTMLResponse)
def profiles(
    request: Request, state: State, _admin: PageAdmin, agent: ScopeText = "", user: ScopeText = ""
) -> HTMLResponse:
    documents = []
    if agent.strip() and user.strip():
        for kind in ProfileType:
            doc = state.client.profile(agent.strip(), user.strip(), kind)
            documents.append(_shown(state, doc.type, doc.agent_id, doc.user_id))
    return Page(request).render("profiles.html", agent=agent, user=user, documents=documents)


@router.post("/profiles/{kind}", response_class=HTMLResponse)
def save(
    request: Request,
    state: State,
    _admin: PageAdmin,
    kind: Literal["user", "work"],
    agent: FormText,
    user: FormText,
    content: Annotated[str, Form(max_length=200_000)],
) -> HTMLResponse:
    page = Page(request)
    try:
        document = json.loads(content)
        if not isinstance(document, dict):
            raise ValueError("the document must be a JSON object")
        state.client.put_profile(
            agent, user, ProfileType(kind), document, shared=user == SHARED_USER
        )
    except (ValueError, ProfileRejected) as exc:
        shown = _shown(state, ProfileType(kind), agent, user) | {"text": content}
        return page.render("_profile.html", status=422, d=shown, error=str(exc))
    return page.render("_profile.html", d=_shown(state, ProfileType(kind), agent, user), saved=True)


@router.post("/scopes/erase", response_class=HTMLResponse)
def erase(
    request: Request, state: State, admin: PageAdmin, agent: FormText, user: FormText
) -> HTMLResponse:
    """Every row of the scope, gone (the button asks first)."""
    try:
        scope = EraseRequest(agent_id=agent.strip(), user_id=user.strip())
    except ValidationError as exc:
        return Page(request).invalid(exc)
    erased = state.client.erase(scope.agent_id, scope.user_id, actor=f"page, key {admin.name}")
    return Page(request).render(
        "_message.html", message_key="erase.done", count=sum(erased.rows.values())
    )


def _shown(state: State, kind: ProfileType, agent: str, user: str) -> dict[str, object]:
    doc = state.client.profile(agent, user, kind)
    return {
        "kind": kind.value,
        "agent": agent,
        "user": user,
        "version": doc.version,
        "status": doc.status.value,
        "text": json.dumps(doc.content, ensure_ascii=False, indent=2),
        "prompt": state.client.build_profile_prompt(agent, user, kind, token_budget=800),
    }
