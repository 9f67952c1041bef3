"""Factories for test data, written through the same functions the pipeline uses."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from memoryd.memories.store import create_memory
from memoryd.models.db import utcnow
from memoryd.models.keys import Scope
from memoryd.models.schemas import Fact
from memoryd.models.tables import Actor, Category, Memory
from memoryd.settings import Settings


def make_memory(
    session: Session,
    settings: Settings,
    content: str = "Prefers tea",
    *,
    agent_id: str = "bot",
    user_id: str = "ann",
    confidence: float = 0.95,
    category: Category = Category.USER,
    temporary: str = "no",
    now: datetime | None = None,
    **columns: Any,
) -> Memory:
    fact = Fact(content=content, confidence=confidence, category=category, temporary=temporary)
    memory = create_memory(
        session, settings, Scope(agent_id, user_id), fact, now or utcnow(), actor=Actor.API
    )
    for name, value in columns.items():
        setattr(memory, name, value)
    session.flush()
    return memory
