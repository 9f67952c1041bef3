"""`MemoryClient`: what a chat backend calls. Writes return at once; extraction is async."""

from __future__ import annotations

import builtins
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memoryd import client_tools, tracing
from memoryd.agents import config as agent_config
from memoryd.client_profiles import ProfileMethods
from memoryd.client_receipts import ReceiptMethods
from memoryd.errors import TurnRejected
from memoryd.ingest.buffer import end_session, ingest, payload_items
from memoryd.memories import edits, erasure
from memoryd.memories.erasure import ErasureOut
from memoryd.memories.health import MemoryHealth, memory_health
from memoryd.models.db import session_scope, utcnow
from memoryd.models.keys import Scope, SessionKey
from memoryd.models.profiles import ProfileType
from memoryd.models.schemas import MAX_PAGE, EventOut, IngestResult, MemoryOut, TurnIn
from memoryd.models.tables import Category
from memoryd.recall import candidates, flow
from memoryd.recall.as_of import checked_instant, memories_as_of, paged
from memoryd.recall.embeddings import forget_scope
from memoryd.recall.hits import Hit
from memoryd.recall.session_context import SessionContext, session_context
from memoryd.recall.usage import mark_referenced
from memoryd.settings import Settings, get_settings
from memoryd.text import estimate_tokens

if TYPE_CHECKING:  # Celery is imported only once something is dispatched
    from celery import Celery

    from memoryd.ingest.dispatch import BackgroundDispatcher


class MemoryClient(ProfileMethods, ReceiptMethods):
    """Entry point for chat backends written in Python.

    `dispatch=False` stores turns without sending Celery messages; beat's sweeper then
    picks the sessions up (useful where no broker is reachable from the caller).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        celery_app: Celery | None = None,
        dispatch: bool = True,
    ) -> None:
        self.settings = settings or get_settings()
        self.dispatch = dispatch
        self._celery = celery_app
        self._dispatcher: BackgroundDispatcher | None = None
        self._lock = threading.Lock()

    @property
    def celery(self) -> Celery:
        if self._celery is None:
            from memoryd.worker import make_celery

            self._celery = make_celery(self.settings)
        return self._celery

    def _trigger(self, keys: list[SessionKey]) -> int:
        """Ask workers to look at these sessions (in the background; see dispatch.py)."""
        if not keys or not self.dispatch:
            return 0
        with self._lock:
            if self._dispatcher is None:
                from memoryd.ingest.dispatch import BackgroundDispatcher

                self._dispatcher = BackgroundDispatcher(self.celery)
        return self._dispatcher.submit(keys, tracing.headers(self.settings.server))

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until triggers sent so far reached the broker. Scripts need not call it:
        it also runs when the process exits normally."""
        return self._dispatcher.flush(timeout) if self._dispatcher else True

    def close(self, timeout: float = 5.0) -> None:
        """Flush pending triggers; the client may still be used afterwards."""
        self.flush(timeout)

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------------------- ingest

    def enqueue_turn(
        self, /, turn: Mapping[str, Any] | TurnIn | None = None, **fields: Any
    ) -> IngestResult:
        """Store one turn. Raises TurnRejected naming the bad field(s)."""
        item = turn if turn is not None else fields
        result = self.enqueue_turns([item])
        if result.rejected:
            errors = result.rejected[0]["errors"]
            raise TurnRejected(
                "turn rejected: " + "; ".join(f"{e['field']}: {e['message']}" for e in errors),
                errors,
            )
        return result

    def enqueue_turns(self, turns: Sequence[Mapping[str, Any] | TurnIn]) -> IngestResult:
        """Store many turns in one transaction. Per item: each bad item is reported in
        `rejected` (by index, with field errors) and every good item is stored."""
        with tracing.span(self.settings, "memoryd.enqueue", turns=len(turns)) as span:
            result, due = ingest(self.settings, turns, utcnow())
            result.dispatched_sessions = self._trigger(due)
            tracing.record(span, result)
        return result

    def ingest_payload(self, payload: Any) -> IngestResult:
        """The `memoryd.ingest_turns` payload: {"turns": [...]}, a list, or one turn."""
        return self.enqueue_turns(payload_items(payload))

    def end_session(self, agent_id: str, user_id: str, session_id: str) -> bool:
        """The conversation is over: extract its remaining turns now, even a partial batch."""
        key = SessionKey(agent_id, user_id, session_id)
        ids = {"agent_id": agent_id, "user_id": user_id, "session_id": session_id}
        with tracing.span(self.settings, "memoryd.end_session", **ids) as span:
            with session_scope(self.settings.storage) as session:
                known = end_session(session, key, utcnow())
            span.set_attribute("memoryd.known", known)
            if known:
                self._trigger([key])
        return known

    def session_context(
        self, agent_id: str, user_id: str, session_id: str, token_budget: int = 2000
    ) -> SessionContext:
        """The session's synopsis plus its newest turns verbatim, within `token_budget`."""
        with session_scope(self.settings.storage, readonly=True) as session:
            return session_context(session, SessionKey(agent_id, user_id, session_id), token_budget)

    # ---------------------------------------------------------------------------- read side

    def recall(
        self,
        query: str,
        agent_id: str,
        user_id: str,
        k: int | None = None,
        categories: Sequence[str] | None = None,
        tiers: Sequence[str] | None = None,
        session_id: str | None = None,
        as_of: datetime | None = None,
    ) -> list[Hit]:
        """Ranked active memories of the scope (and the agent's shared scope) for `query`.
        Each recall is logged and counted (it feeds promotion and weights). With `as_of`
        (timezone-aware), the memories that were active at that moment, with the text
        they had then; such a look back is not logged (memoryd/recall/as_of.py)."""
        return flow.ranked(
            self.settings,
            query,
            agent_id,
            user_id,
            k,
            categories,
            tiers,
            session_id,
            as_of=checked_instant(as_of),
        )

    def build_context(
        self,
        query: str,
        agent_id: str,
        user_id: str,
        token_budget: int | None = None,
        session_id: str | None = None,
        profile: ProfileType | str | None = None,
        as_of: datetime | None = None,
    ) -> str:
        """The `<memory-context>` block for the next prompt, within `token_budget` (the
        agent's `context_token_budget` by default), or "" when nothing relevant fits or
        the agent's injection rules say no (memoryd/recall/inject.py). It is never
        written to the chat history. With `profile` ("user" or "work"), that document
        comes first, within half the budget, whatever the rules decide for memories.
        With `as_of`, the block of the memories active at that moment (not with
        `profile`: profiles keep no history to read back)."""
        as_of = checked_instant(as_of)
        if as_of is not None:
            if profile is not None:
                raise ValueError("as_of cannot be combined with profile")
            return flow.context_block(
                self.settings, query, agent_id, user_id, token_budget, session_id, as_of
            )
        if profile is not None:
            if token_budget is None:
                with session_scope(self.settings.storage, readonly=True) as session:
                    agent = agent_config.for_agent(session, self.settings, agent_id)
                token_budget = agent.agent.context_token_budget
            head = self.build_profile_prompt(agent_id, user_id, profile, token_budget // 2)
            rest = token_budget - (estimate_tokens(head) + 1 if head else 0)
            block = self.build_context(query, agent_id, user_id, rest, session_id)
            return "\n\n".join(part for part in (head, block) if part)
        return flow.context_block(self.settings, query, agent_id, user_id, token_budget, session_id)

    def mark_referenced(
        self, reply_text: str, hits: Sequence[Hit], session_id: str | None = None
    ) -> list[int]:
        """Tell memoryd which recalled memories the reply used; they are reinforced."""
        with session_scope(self.settings.storage) as session:
            return mark_referenced(session, self.settings, reply_text, hits, session_id, utcnow())

    def remember(
        self,
        agent_id: str,
        user_id: str,
        content: str,
        *,
        category: Category | str = Category.USER,
        name: str = "",
        tags: Sequence[str] = (),
        replaces: int | None = None,
        shared: bool = False,
    ) -> MemoryOut:
        """Save a memory now ("remember this"): long tier, deduplicated, may replace one.
        Writing the agent's shared scope (user_id "*") needs `shared=True`."""
        saved, _created = self.save(
            agent_id,
            user_id,
            content,
            category=category,
            name=name,
            tags=tags,
            replaces=replaces,
            shared=shared,
        )
        return saved

    def save(
        self,
        agent_id: str,
        user_id: str,
        content: str,
        *,
        category: Category | str = Category.USER,
        name: str = "",
        tags: Sequence[str] = (),
        replaces: int | None = None,
        shared: bool = False,
    ) -> tuple[MemoryOut, bool]:
        """`remember`, also saying whether the memory was created (False: the scope
        already held it, and this save confirmed it)."""
        scope = Scope(agent_id, user_id)
        with session_scope(self.settings.storage) as session:
            similar = candidates.near(session, self.settings, scope, content)
            return edits.remember(
                session,
                self.settings,
                scope,
                content,
                utcnow(),
                category=Category(category),
                name=name,
                tags=tags,
                replaces=replaces,
                shared=shared,
                nearby=similar,
            )

    def update(
        self,
        agent_id: str,
        user_id: str,
        memory_id: int,
        *,
        content: str | None = None,
        name: str | None = None,
        category: Category | str | None = None,
        tags: Sequence[str] | None = None,
        shared: bool = False,
    ) -> MemoryOut:
        with session_scope(self.settings.storage) as session:
            saved = edits.update(
                session,
                self.settings.memories,
                Scope(agent_id, user_id),
                memory_id,
                utcnow(),
                content=content,
                name=name,
                category=Category(category) if category else None,
                tags=tags,
                shared=shared,
            )
        return saved

    def forget(
        self, agent_id: str, user_id: str, memory_id: int, *, shared: bool = False
    ) -> MemoryOut:
        """Soft delete (restorable, history kept)."""
        with session_scope(self.settings.storage) as session:
            return edits.forget(
                session, Scope(agent_id, user_id), memory_id, utcnow(), shared=shared
            )

    def restore(
        self, agent_id: str, user_id: str, memory_id: int, *, shared: bool = False
    ) -> MemoryOut:
        """Bring back an archived, expired or deleted memory."""
        with session_scope(self.settings.storage) as session:
            return edits.restore(
                session,
                self.settings.memories,
                Scope(agent_id, user_id),
                memory_id,
                utcnow(),
                shared=shared,
            )

    def erase(
        self, agent_id: str, user_id: str, session_id: str | None = None, *, actor: str = "client"
    ) -> ErasureOut:
        """Remove every row of the scope (with `session_id`: of that session and the
        memories learnt from it) from every table. Cannot be undone; safe to repeat and
        to run while workers run. `actor` is recorded in the audit row."""
        scope = Scope(agent_id, user_id)
        erased = erasure.erase(self.settings, scope, actor=actor, session_id=session_id)
        forget_scope(self.settings.storage, scope)  # this process's cached vectors of the scope
        return erased

    def get(self, agent_id: str, user_id: str, memory_id: int) -> MemoryOut:
        with session_scope(self.settings.storage, readonly=True) as session:
            return edits.get(session, Scope(agent_id, user_id), memory_id)

    def list(
        self,
        agent_id: str,
        user_id: str,
        *,
        statuses: Sequence[str] = ("active",),
        categories: Sequence[str] | None = None,
        tiers: Sequence[str] | None = None,
        limit: int = 50,
        offset: int = 0,
        as_of: datetime | None = None,
    ) -> list[MemoryOut]:
        """The scope's memories of these statuses, newest first; with `as_of`, those
        that had these statuses at that moment, as they were then."""
        as_of = checked_instant(as_of)
        with session_scope(self.settings.storage, readonly=True) as session:
            if as_of is not None:
                scope = Scope(agent_id, user_id)
                past = memories_as_of(session, scope, as_of, statuses, categories, tiers)
                return paged(past, limit, offset)
            return edits.list_memories(
                session,
                Scope(agent_id, user_id),
                statuses=statuses,
                categories=categories,
                tiers=tiers,
                limit=limit,
                offset=offset,
            )

    def history(
        self, agent_id: str, user_id: str, memory_id: int, *, after: int = 0, limit: int = MAX_PAGE
    ) -> builtins.list[EventOut]:
        """A memory's history, oldest first: up to `limit` (1 to MAX_PAGE, 500, or a
        ValueError) events after the one whose `id` is `after`; the next page starts
        after the last."""
        with session_scope(self.settings.storage, readonly=True) as session:
            return edits.history(session, Scope(agent_id, user_id), memory_id, after, limit)

    def health(self, agent_id: str | None = None, user_id: str | None = None) -> MemoryHealth:
        """Memory health figures for one scope, or the whole store without one."""
        scope = Scope(agent_id, user_id) if agent_id and user_id else None
        with session_scope(self.settings.storage, readonly=True) as session:
            return memory_health(session, utcnow(), scope)

    def execute_tool(
        self,
        agent_id: str,
        user_id: str,
        name: str,
        arguments: str | dict[str, Any],
        *,
        shared: bool = False,
    ) -> dict[str, Any]:
        """Run a `memory_save` / `memory_recall` tool call for this scope (see tools.py).
        `shared=True`: the caller means to write the agent's shared `*` scope."""
        return client_tools.execute(self, agent_id, user_id, name, arguments, shared)
