"""The page's actions (htmx POSTs): each calls the same functions as the API or the CLI
and answers with the HTML fragment to swap in."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Literal

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError

from memoryd.agents import config
from memoryd.agents.config import AgentSettings
from memoryd.client import MemoryClient
from memoryd.memories import conflicts, review
from memoryd.models.db import session_scope, utcnow
from memoryd.models.schemas import MemoryOut
from memoryd.server.page.render import Page, PageAdmin, memory_by_id
from memoryd.server.routes.ops import DeadLetterAction, settle_failed
from memoryd.server.schemas import AgentPath, MemoryIdPath, MemoryUpdate
from memoryd.server.state import State

router = APIRouter()

FormText = Annotated[str, Form(max_length=10_000)]


def _scope(state: State, memory_id: int) -> tuple[str, str]:
    memory = memory_by_id(state, memory_id)
    return memory.agent_id, memory.user_id


@router.post("/memories/{memory_id}/edit", response_class=HTMLResponse)
def save(
    request: Request,
    state: State,
    _admin: PageAdmin,
    memory_id: MemoryIdPath,
    content: FormText,
    name: FormText = "",
    category: FormText = "",
    tags: FormText = "",
) -> HTMLResponse:
    stored = memory_by_id(state, memory_id)
    try:
        change = MemoryUpdate(
            content=content,
            # The form sends the title it was shown: unchanged, it is "not given", so a
            # content edit can clear a title that only copied the old text.
            name=None if name == stored.name else name,
            category=category or None,
            tags=[t.strip() for t in tags.split(",") if t.strip()],
        )
    except ValidationError as exc:
        page = Page(request)
        error = page.invalid_fields(exc)  # shown in the form, beside what was typed
        return page.render("_edit.html", status=422, m=stored, error=error)
    memory = state.client.update(
        stored.agent_id,
        stored.user_id,
        memory_id,
        content=change.content,
        name=change.name,
        category=change.category,
        tags=change.tags,
        shared=True,  # an admin editing the card in hand, the shared scope's included
    )
    return Page(request).render("_card.html", m=memory)


def _card_change(path: str, name: str, change: Callable[..., MemoryOut]) -> None:
    """A POST that changes one memory through a MemoryClient method and answers with its
    card: one handler for delete and restore, an admin acting on the card in hand (the
    shared scope's included)."""

    @router.post(path, name=name, response_class=HTMLResponse)
    def card_change(
        request: Request, state: State, _admin: PageAdmin, memory_id: MemoryIdPath
    ) -> HTMLResponse:
        memory = change(state.client, *_scope(state, memory_id), memory_id, shared=True)
        return Page(request).render("_card.html", m=memory)


_card_change("/memories/{memory_id}/delete", "delete", MemoryClient.forget)
_card_change("/memories/{memory_id}/restore", "restore", MemoryClient.restore)


@router.post("/conflicts/{memory_id}/keep/{side}", response_class=HTMLResponse)
def keep(
    request: Request,
    state: State,
    _admin: PageAdmin,
    memory_id: MemoryIdPath,
    side: Literal["old", "new"],
) -> HTMLResponse:
    with session_scope(state.settings.storage) as session:
        conflicts.resolve(session, state.settings.memories, memory_id, side, utcnow())
    return Page(request).render("_message.html", message_key="conflicts.done")


@router.post("/review/{memory_id}/{decision}", response_class=HTMLResponse)
def decide(
    request: Request,
    state: State,
    _admin: PageAdmin,
    memory_id: MemoryIdPath,
    decision: Literal["approve", "decline"],
) -> HTMLResponse:
    with session_scope(state.settings.storage) as session:
        if decision == "approve":
            review.approve(session, state.settings, memory_id, utcnow())
        else:
            review.decline(session, memory_id, utcnow())
    return Page(request).render("_message.html", message_key="review.done")


@router.post("/clean-up", response_class=HTMLResponse)
def clean_up(request: Request, state: State, _admin: PageAdmin) -> HTMLResponse:
    with session_scope(state.settings.storage) as session:
        count = review.expire_soon(session, utcnow())
    return Page(request).render("_message.html", message_key="panel.cleaned", count=count)


# What each dead-letter action's message says it did (i18n key batches.<done>).
DEAD_LETTER_DONE = {"retry": "retried", "skip": "skipped", "purge": "purged"}


@router.post("/dead-letters/{action}", response_class=HTMLResponse)
def settle_dead_letters(
    request: Request,
    state: State,
    _admin: PageAdmin,
    action: DeadLetterAction,
    agent_id: Annotated[str, Form(max_length=200)] = "",
    user_id: Annotated[str, Form(max_length=200)] = "",
    session_id: Annotated[str, Form(max_length=200)] = "",
) -> HTMLResponse:
    """Retry, skip or delete the dead letters of a session (or all of them)."""
    with session_scope(state.settings.storage) as session:
        count = settle_failed(
            session,
            action,
            agent_id=agent_id or None,  # an empty field: any
            user_id=user_id or None,
            session_id=session_id or None,
        )
    message = f"batches.{DEAD_LETTER_DONE[action]}"
    return Page(request).render("_message.html", message_key=message, count=count)


# What agents.html's on_off select sends: "on", "off", or "" for the default (None).
ON_OFF = {"on": True, "off": False}


@router.post("/agents/{agent_id}/settings", response_class=HTMLResponse)
def save_agent(
    request: Request,
    state: State,
    _admin: PageAdmin,
    agent_id: AgentPath,
    memory_enabled: Annotated[str, Form(max_length=10)] = "",
    prefetch_limit: Annotated[str, Form(max_length=20)] = "",
    context_token_budget: Annotated[str, Form(max_length=20)] = "",
    inject_min_score: Annotated[str, Form(max_length=20)] = "",
    inject_max_items: Annotated[str, Form(max_length=20)] = "",
    memory_categories: Annotated[list[str] | None, Form()] = None,
    inject_tiers: Annotated[list[str] | None, Form()] = None,
    inject_first_round_empty: Annotated[str, Form(max_length=10)] = "",
    inject_min_query_length: Annotated[str, Form(max_length=20)] = "",
    inject_long_term_triggers: Annotated[str, Form(max_length=20_000)] = "",
) -> HTMLResponse:
    triggers = [t.strip() for t in inject_long_term_triggers.split(",") if t.strip()]
    raw = {
        "memory_enabled": ON_OFF.get(memory_enabled),
        "prefetch_limit": prefetch_limit.strip() or None,
        "context_token_budget": context_token_budget.strip() or None,
        "inject_min_score": inject_min_score.strip() or None,
        "inject_max_items": inject_max_items.strip() or None,
        "memory_categories": memory_categories or None,
        "inject_tiers": inject_tiers or None,
        "inject_first_round_empty": ON_OFF.get(inject_first_round_empty),
        "inject_min_query_length": inject_min_query_length.strip() or None,
        "inject_long_term_triggers": triggers or None,
    }
    try:
        values = AgentSettings.model_validate(raw)
    except ValidationError as exc:
        return Page(request).invalid(exc)
    with session_scope(state.settings.storage) as session:
        config.put(session, agent_id, values, utcnow())
    return Page(request).render("_message.html", message_key="agents.saved")
