"""The identities every stage passes around: a scope and a chat session within it."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_
from sqlalchemy.sql.elements import ColumnElement

from memoryd.models.tables import ChatSession, Turn

SessionTable = type[Turn] | type[ChatSession]


@dataclass(frozen=True)
class Scope:
    """Whose memory: one user of one agent (user_id `*` is the agent's shared scope)."""

    agent_id: str
    user_id: str


@dataclass(frozen=True, order=True)
class SessionKey:
    """One conversation of a scope; the unit of batching and of leases."""

    agent_id: str
    user_id: str
    session_id: str

    @property
    def scope(self) -> Scope:
        return Scope(self.agent_id, self.user_id)

    def as_args(self) -> list[str]:
        return [self.agent_id, self.user_id, self.session_id]


def session_pk(key: SessionKey) -> tuple[ColumnElement[bool], ...]:
    """The `sessions` row of this key."""
    return (ChatSession.of(key), ChatSession.session_id == key.session_id)


def turns_of(key: SessionKey) -> tuple[ColumnElement[bool], ...]:
    """Every turn of this session."""
    return (Turn.of(key), Turn.session_id == key.session_id)


def in_sessions(
    table: SessionTable, agent_id: str | None, user_id: str | None, session_id: str | None
) -> list[ColumnElement[bool]]:
    """The rows of an agent, a user or a session: each part of the key left open when None
    (all three None: every row)."""
    key = ((table.agent_id, agent_id), (table.user_id, user_id), (table.session_id, session_id))
    return [column == value for column, value in key if value is not None]


def turn_session() -> ColumnElement[bool]:
    """Join condition of a turn and its session's row."""
    return and_(
        ChatSession.agent_id == Turn.agent_id,
        ChatSession.user_id == Turn.user_id,
        ChatSession.session_id == Turn.session_id,
    )
