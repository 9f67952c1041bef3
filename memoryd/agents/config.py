"""Per-agent memory settings: what each agent overrides of Settings, and the effective
Settings copy that recall, context and extraction then run with.

An agent's row names the Settings fields it overrides; NULL means "the default". The
effective settings are `settings.updated(**overrides)`, so every stage reads
them exactly as it reads any other setting.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints
from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from memoryd.models.checks import clean_text
from memoryd.models.db import session_scope
from memoryd.models.tables import AgentConfig, Category, ChatSession, Tier
from memoryd.settings import AgentDefaults, Settings

Keyword = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=100),
    AfterValidator(clean_text),  # no NUL or lone surrogate, as everywhere else
]


class AgentSettings(BaseModel):
    """What one agent overrides; a field left null takes the default from Settings."""

    model_config = ConfigDict(extra="forbid")

    memory_enabled: bool | None = Field(None, description="Extract and inject memories at all")
    prefetch_limit: int | None = Field(
        None, ge=0, le=500, description="Memories recalled (and shown to the extractor)"
    )
    context_token_budget: int | None = Field(
        None, ge=1, le=100_000, description="Default token budget of the context block"
    )
    memory_categories: list[Category] | None = Field(
        None, min_length=1, description="Categories extracted and recalled; null means all"
    )
    inject_min_score: float | None = Field(
        None, ge=0, le=100, description="Recalled memories scoring under this stay out of context"
    )
    inject_max_items: int | None = Field(
        None, ge=1, le=500, description="Most memories one context block holds"
    )
    inject_tiers: list[Tier] | None = Field(
        None, min_length=1, description="Tiers a context block may use; null means both"
    )
    inject_first_round_empty: bool | None = Field(
        None, description="No context block before the session's first reply"
    )
    inject_min_query_length: int | None = Field(
        None, ge=0, le=10_000, description="Queries shorter than this (characters) get no block"
    )
    inject_long_term_triggers: list[Keyword] | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="Long-tier memories are injected only for queries containing one",
    )
    recall_pending: bool | None = Field(
        None, description="Recall and context also show matching turns not yet extracted"
    )


FIELDS = list(AgentSettings.model_fields)


class AgentSettingsOut(BaseModel):
    """An agent's overrides and the values in effect."""

    agent_id: str
    overrides: AgentSettings
    effective: dict[str, object]


# Every recall reads its agent's row: the statement is built once and run on the
# connection, without the ORM's work per statement (about 1 ms a recall less).
_STORED = select(*(getattr(AgentConfig, name) for name in FIELDS)).where(
    AgentConfig.agent_id == bindparam("agent_id")
)


def stored(session: Session, agent_id: str) -> AgentSettings:
    return _stored(session, agent_id) or AgentSettings()


def _stored(session: Session, agent_id: str) -> AgentSettings | None:
    row = session.connection().execute(_STORED, {"agent_id": agent_id}).first()
    return None if row is None else AgentSettings.model_validate(row._asdict())


def for_agent(session: Session, settings: Settings, agent_id: str) -> Settings:
    """The Settings an agent's memory runs with: the defaults plus its overrides."""
    agent = _stored(session, agent_id)
    if agent is None:  # most agents keep the defaults
        return settings
    overrides = agent.model_dump(exclude_none=True, mode="json")
    # Settings are frozen and hashable (extractors are cached by them): lists go in as tuples.
    overrides = {k: tuple(v) if isinstance(v, list) else v for k, v in overrides.items()}
    return settings.updated(**overrides) if overrides else settings


def describe(session: Session, settings: Settings, agent_id: str) -> AgentSettingsOut:
    overrides = stored(session, agent_id)
    effective = for_agent(session, settings, agent_id)
    return AgentSettingsOut(
        agent_id=agent_id,
        overrides=overrides,
        effective={name: effective.value(name) for name in FIELDS},
    )


def put(session: Session, agent_id: str, values: AgentSettings, now: datetime) -> None:
    """Replace an agent's overrides (fields left null go back to the defaults)."""
    row = session.get(AgentConfig, agent_id)
    if row is None:
        row = AgentConfig(agent_id=agent_id, updated_at=now)
        session.add(row)
    for name, value in values.model_dump(mode="json").items():
        setattr(row, name, value)
    row.updated_at = now
    session.flush()


def known_agents(session: Session, limit: int = 1000) -> list[str]:
    """Agents with settings or sessions, for the page's pickers."""
    configured = session.scalars(select(AgentConfig.agent_id).limit(limit))
    chatting = session.scalars(select(ChatSession.agent_id).distinct().limit(limit))
    return sorted(set(configured) | set(chatting))


# ------------------------------------------------------------------- used by the stages


def categories_for(settings: AgentDefaults, requested: Sequence[str] | None) -> list[str] | None:
    """The categories a recall may read: the requested ones within the agent's. None
    means no filter; an empty list means nothing may be read."""
    allowed = settings.memory_categories
    if allowed is None:
        return list(requested) if requested else None
    if not requested:
        return list(allowed)
    return [c for c in requested if c in allowed]


def extraction_settings(settings: Settings, agent_id: str) -> Settings:
    """The agent's settings for one extraction task (its own short read)."""
    with session_scope(settings.storage, readonly=True) as session:
        return for_agent(session, settings, agent_id)
