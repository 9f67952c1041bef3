"""The page's profiles screen: a scope's two documents (seed 001), as a form to edit
(profile_form.py) and as the agent's prompt will show them."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError

from memoryd.errors import ProfileRejected
from memoryd.memories.erasure import EraseRequest
from memoryd.models.profiles import ProfileType
from memoryd.models.tables import SHARED_USER
from memoryd.server.page.profile_form import (
    document_from_form,
    form_fields,
    with_typed,
)
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


async def form_values(request: Request) -> dict[str, str]:
    """Every text field of the posted form (the profile form's names are its paths). A
    name sent more than once (a list's checkboxes, after the empty hidden value that
    stands for none ticked) is its values a line each, as a list's textarea sends them."""
    form = await request.form()
    return {k: "\n".join(v for v in form.getlist(k) if isinstance(v, str)) for k in form}


@router.post("/profiles/{kind}", response_class=HTMLResponse)
def save(
    request: Request,
    state: State,
    _admin: PageAdmin,
    kind: Literal["user", "work"],
    agent: FormText,
    user: FormText,
    form: Annotated[dict[str, str], Depends(form_values)],
) -> HTMLResponse:
    """The form's values over the stored document, saved through the API's validation."""
    page = Page(request)
    profile_type = ProfileType(kind)
    stored = state.client.profile(agent, user, profile_type)
    try:
        document = document_from_form(profile_type, stored.content, form)
        state.client.put_profile(agent, user, profile_type, document, shared=user == SHARED_USER)
    except (ValueError, ProfileRejected) as exc:
        shown = _shown(state, profile_type, agent, user)
        shown["fields"] = with_typed(shown["fields"], form)  # type: ignore[arg-type]
        error = page.wording.of(exc, str(exc)) or page.wording.t("error.title")
        return page.render("_profile.html", status=422, d=shown, error=error)
    return page.render("_profile.html", d=_shown(state, profile_type, agent, user), saved=True)


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
        "fields": form_fields(kind, doc.content, doc.field_meta),
        "prompt": state.client.build_profile_prompt(agent, user, kind, token_budget=800),
    }
