"""The page's screens (GET): memories with the health panel, conflicts, review queue,
batches with dead letters, per-agent settings, and the sign-in form."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from memoryd.agents import config
from memoryd.memories.conflicts import count_open, open_conflicts
from memoryd.memories.review import count_queue, review_queue
from memoryd.models.base import BatchStatus
from memoryd.models.db import session_scope, utcnow
from memoryd.models.schemas import MAX_PAGE
from memoryd.monitoring.browse import BrowseFilter, browse, count_browse
from memoryd.monitoring.figures import (
    count_batches,
    count_dead_letters,
    dead_letters,
    health_panel,
    list_batches,
)
from memoryd.server.auth import PAGE_COOKIE, client_address
from memoryd.server.page.paging import PAGE_SIZE, Limit, Offset, Pager, count_cap
from memoryd.server.page.render import Page, PageAdmin, memory_by_id
from memoryd.server.page_sessions import close_session, open_session
from memoryd.server.schemas import HistoryAfter, MemoryIdPath
from memoryd.server.state import State

router = APIRouter()
OLD_COOKIE = "memoryd_key"


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request) -> HTMLResponse:
    return Page(request).render("login.html")


@router.post("/login", response_class=HTMLResponse)
def login(request: Request, state: State, key: Annotated[str, Form(max_length=200)]) -> Response:
    """The key buys a session: the cookie holds the session's token, never the key."""
    address = client_address(request)
    if state.throttle.retry_after(address) is not None:
        return Page(request).render("login.html", status=429, throttled=True)
    principal = state.keys.principal(key.strip())
    if principal is None or not principal.admin:
        state.throttle.failed(address)
        return Page(request).render("login.html", status=401, failed=True)
    hours = state.settings.server.page_session_hours
    with session_scope(state.settings.storage) as session:
        token = open_session(session, principal, utcnow(), hours)
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(OLD_COOKIE)  # before 0019 the cookie held the key itself
    response.set_cookie(
        PAGE_COOKIE,
        token,
        max_age=int(hours * 3600),
        httponly=True,
        samesite="strict",
        # Behind a TLS proxy the request arrives as plain HTTP: Secure unless told that
        # this is a development server.
        secure=not state.settings.server.dev_mode,
    )
    return response


@router.post("/logout")
def logout(request: Request, state: State) -> Response:
    if token := request.cookies.get(PAGE_COOKIE):
        with session_scope(state.settings.storage) as session:
            close_session(session, token)
    response = RedirectResponse("/login", status_code=303)
    secure = not state.settings.server.dev_mode
    for name in (PAGE_COOKIE, OLD_COOKIE):
        response.delete_cookie(name, secure=secure, httponly=True, samesite="strict")
    return response


@router.get("/", response_class=HTMLResponse)
def memories(
    request: Request,
    state: State,
    _admin: PageAdmin,
    q: Annotated[str, Query(max_length=500)] = "",
    category: Annotated[str, Query(max_length=20)] = "",
    tier: Annotated[str, Query(max_length=10)] = "",
    status: Annotated[str, Query(max_length=12)] = "active",
    agent: Annotated[str, Query(max_length=200)] = "",
    user: Annotated[str, Query(max_length=200)] = "",
    offset: Offset = 0,
    limit: Limit = PAGE_SIZE,
) -> HTMLResponse:
    try:
        filters = BrowseFilter(
            q=q, category=category, tier=tier, status=status, agent=agent, user=user
        )
    except ValidationError:
        filters = BrowseFilter()
    filters = filters.model_copy(update={"offset": offset, "limit": limit})
    with session_scope(state.settings.storage, readonly=True) as session:
        panel = health_panel(session, state.settings, utcnow())
        found = browse(session, filters)
        total = count_browse(session, filters, count_cap(offset))
        agents = config.known_agents(session)
    pager = Pager(request, offset, limit, len(found), total)
    return Page(request).render(
        "memories.html", panel=panel, memories=found, filters=filters, agents=agents, pager=pager
    )


def _memory_fragment(path: str, name: str, template: str) -> None:
    """A GET route that shows one memory in `template`: one handler for the card and
    for its edit form, which htmx swaps for each other."""

    @router.get(path, name=name, response_class=HTMLResponse)
    def fragment(
        request: Request, state: State, _admin: PageAdmin, memory_id: MemoryIdPath
    ) -> HTMLResponse:
        return Page(request).render(template, m=memory_by_id(state, memory_id))


_memory_fragment("/memories/{memory_id}/card", "card", "_card.html")
_memory_fragment("/memories/{memory_id}/edit", "edit_form", "_edit.html")


@router.get("/memories/{memory_id}/history", response_class=HTMLResponse)
def history(
    request: Request,
    state: State,
    _admin: PageAdmin,
    memory_id: MemoryIdPath,
    after: HistoryAfter = 0,
) -> HTMLResponse:
    """A page of the memory's history; a full one ends in a button for the next."""
    memory = memory_by_id(state, memory_id)
    events = state.client.history(memory.agent_id, memory.user_id, memory_id, after=after)
    more = len(events) == MAX_PAGE
    return Page(request).render("_history.html", m=memory, events=events, more=more)


@router.get("/conflicts", response_class=HTMLResponse)
def conflicts(
    request: Request, state: State, _admin: PageAdmin, offset: Offset = 0, limit: Limit = PAGE_SIZE
) -> HTMLResponse:
    with session_scope(state.settings.storage, readonly=True) as session:
        pairs = open_conflicts(session, limit=limit, offset=offset)
        total = count_open(session, cap=count_cap(offset))
    pager = Pager(request, offset, limit, len(pairs), total)
    return Page(request).render("conflicts.html", conflicts=pairs, pager=pager)


@router.get("/review", response_class=HTMLResponse)
def review(
    request: Request, state: State, _admin: PageAdmin, offset: Offset = 0, limit: Limit = PAGE_SIZE
) -> HTMLResponse:
    with session_scope(state.settings.storage, readonly=True) as session:
        queue = review_queue(session, state.settings.extraction, limit=limit, offset=offset)
        total = count_queue(session, state.settings.extraction, count_cap(offset))
    pager = Pager(request, offset, limit, len(queue), total)
    return Page(request).render("review.html", memories=queue, pager=pager)


@router.get("/batches", response_class=HTMLResponse)
def batches(
    request: Request,
    state: State,
    _admin: PageAdmin,
    status: Annotated[BatchStatus | Literal[""] | None, Query()] = None,  # "": any
    offset: Offset = 0,
    dead_offset: Offset = 0,
    limit: Limit = PAGE_SIZE,
) -> HTMLResponse:
    """Dead letters first (what needs a person), then the batches, each list paged on
    its own; `status` keeps only the batches in that state."""
    with session_scope(state.settings.storage, readonly=True) as session:
        dead = dead_letters(session, limit=limit, offset=dead_offset)
        dead_total = count_dead_letters(session, cap=count_cap(dead_offset))
        rows = list_batches(session, status=status or None, limit=limit, offset=offset)
        total = count_batches(session, status=status or None, cap=count_cap(offset))
    return Page(request).render(
        "batches.html",
        batches=rows,
        dead=dead,
        batch_status=status or "",
        batch_statuses=[s.value for s in BatchStatus],
        batches_pager=Pager(request, offset, limit, len(rows), total),
        dead_pager=Pager(request, dead_offset, limit, len(dead), dead_total, "dead_offset"),
    )


@router.get("/agents", response_class=HTMLResponse)
def agents(
    request: Request,
    state: State,
    _admin: PageAdmin,
    agent: Annotated[str, Query(max_length=200)] = "",
) -> HTMLResponse:
    with session_scope(state.settings.storage, readonly=True) as session:
        known = config.known_agents(session)
        chosen = config.describe(session, state.settings, agent.strip()) if agent.strip() else None
    return Page(request).render("agents.html", agents=known, chosen=chosen)
