"""Seed 003 §3.3's injection rules: whether a context block is built for a query at all,
and which tiers it may draw from. The agent's settings hold them (memoryd/agents)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.models.keys import SessionKey, turns_of
from memoryd.models.tables import Tier, Turn
from memoryd.recall.hits import Hit
from memoryd.settings import AgentDefaults


def first_round(session: Session, key: SessionKey) -> bool:
    """The session has had no reply yet (no assistant turn stored), whether or not the
    caller stored the user's first turn before asking."""
    stmt = select(Turn.id).where(*turns_of(key), Turn.role == "assistant").limit(1)
    return session.scalar(stmt) is None


def blocked(session: Session, settings: AgentDefaults, query: str, key: SessionKey | None) -> bool:
    """No block for a query under `inject_min_query_length` characters, nor, with
    `inject_first_round_empty`, in a session's first round (when the call names it)."""
    if len(query.strip()) < settings.inject_min_query_length:
        return True
    return settings.inject_first_round_empty and key is not None and first_round(session, key)


def tiers_for(settings: AgentDefaults, query: str) -> list[str] | None:
    """The tiers a block may use (None: any; []: none). With `inject_long_term_triggers`,
    the long tier only when the query contains one of them, case-insensitively: seed
    003's long_term_trigger, short-term memory always, the long-term store on demand."""
    tiers = list(settings.inject_tiers) if settings.inject_tiers else None
    triggers = settings.inject_long_term_triggers
    if not triggers or any(t.strip().casefold() in query.casefold() for t in triggers):
        return tiers
    return [t for t in tiers or [Tier.SHORT, Tier.LONG] if t != Tier.LONG]


def injectable(settings: AgentDefaults, hits: Sequence[Hit]) -> list[Hit]:
    """The hits a context block may use under the agent's injection rules, in the order
    recall placed them (the minimum is of each hit's own score)."""
    kept = [h for h in hits if h.score >= settings.inject_min_score]
    kept.sort(key=lambda h: -h.placed_by)
    return kept[: settings.inject_max_items] if settings.inject_max_items else kept
