"""What a long session looks like to the model: its synopsis plus the newest turns.

The write half (segment summaries and the synopsis) is maintenance/compression.py.
"""

from __future__ import annotations

from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.models.keys import SessionKey, session_pk, turns_of
from memoryd.models.tables import ChatSession, Turn
from memoryd.text import estimate_tokens

SUMMARY_OVERHEAD = 8  # the <session-summary> tags
TURN_OVERHEAD = 2  # "role: "
MAX_RECENT_TURNS = 500  # a context never needs more; bounds the read


class ContextTurn(BaseModel):
    role: str
    content: str


class SessionContext(BaseModel):
    """What a chat backend puts in front of the model for a long session."""

    summary: str | None
    recent_turns: list[ContextTurn]
    tokens: int

    def as_text(self) -> str:
        parts = []
        if self.summary:
            parts.append(f"<session-summary>\n{self.summary}\n</session-summary>")
        parts.extend(f"{t.role}: {t.content}" for t in self.recent_turns)
        return "\n".join(parts)


def session_context(session: Session, key: SessionKey, token_budget: int) -> SessionContext:
    """The synopsis plus the newest unsummarised turns, verbatim, within `token_budget`
    (estimated locally). When both compete, the synopsis gets at most half the budget,
    so the latest exchange is never crowded out by the summary of older ones."""
    chat = session.scalars(select(ChatSession).where(*session_pk(key))).first()
    rows = session.execute(
        select(Turn.role, Turn.content)
        .where(*turns_of(key), Turn.id > ((chat.summary_upto if chat else None) or 0))
        .order_by(Turn.id.desc())
        .limit(MAX_RECENT_TURNS)
    ).all()
    summary = (chat.summary if chat else None) or ""
    summary_budget = token_budget // 2 if rows else token_budget
    while summary and estimate_tokens(summary) + SUMMARY_OVERHEAD > summary_budget:
        summary = summary[: len(summary) * 3 // 4]
    used = estimate_tokens(summary) + SUMMARY_OVERHEAD if summary else 0
    recent: list[ContextTurn] = []
    for role, content in rows:
        cost = estimate_tokens(content) + TURN_OVERHEAD
        if used + cost > token_budget:
            break
        recent.append(ContextTurn(role=role, content=content))
        used += cost
    recent.reverse()
    return SessionContext(summary=summary or None, recent_turns=recent, tokens=used)
