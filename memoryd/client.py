"""`MemoryClient`: what a chat backend calls. Writes return at once; extraction is async."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from celery import Celery

from memoryd.buffer import SessionKey, end_session, store_turns, validate_turns
from memoryd.compression import SessionContext, session_context
from memoryd.db import session_scope, utcnow
from memoryd.errors import TurnRejected
from memoryd.schemas import IngestResult, TurnIn
from memoryd.settings import Settings, get_settings
from memoryd.tasks.dispatch import BackgroundDispatcher


class MemoryClient:
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
                self._dispatcher = BackgroundDispatcher(self.celery)
        return self._dispatcher.submit(keys)

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until triggers sent so far reached the broker (for scripts about to exit)."""
        return self._dispatcher.flush(timeout) if self._dispatcher else True

    # ---------------------------------------------------------------------------- ingest

    def enqueue_turn(
        self, turn: Mapping[str, Any] | TurnIn | None = None, **fields: Any
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
        good, bad = validate_turns(turns, self.settings)
        # One statement on PostgreSQL, so autocommit makes it a single round trip.
        with session_scope(self.settings, autocommit=True) as session:
            result, due = store_turns(session, self.settings, good, utcnow())
        result.rejected = bad
        result.dispatched_sessions = self._trigger(due)
        return result

    def ingest_payload(self, payload: Any) -> IngestResult:
        """The `memoryd.ingest_turns` payload: {"turns": [...]}, a list, or one turn."""
        if isinstance(payload, Mapping) and "turns" in payload:
            extra = set(payload) - {"turns"}
            if extra:
                raise TurnRejected(f"unknown payload keys {sorted(extra)}; expected only 'turns'")
            items = payload["turns"]
        elif isinstance(payload, Mapping):
            items = [payload]
        else:
            items = payload
        if not isinstance(items, list):
            raise TurnRejected(
                f"payload must be an object with a 'turns' list, got {type(payload).__name__}"
            )
        return self.enqueue_turns(items)

    def end_session(self, agent_id: str, user_id: str, session_id: str) -> bool:
        """The conversation is over: extract its remaining turns now, even a partial batch."""
        key = SessionKey(agent_id, user_id, session_id)
        with session_scope(self.settings) as session:
            known = end_session(session, key, utcnow())
        if known:
            self._trigger([key])
        return known

    def session_context(
        self, agent_id: str, user_id: str, session_id: str, token_budget: int = 2000
    ) -> SessionContext:
        """The session's synopsis plus its newest turns verbatim, within `token_budget`."""
        with session_scope(self.settings) as session:
            return session_context(session, SessionKey(agent_id, user_id, session_id), token_budget)
