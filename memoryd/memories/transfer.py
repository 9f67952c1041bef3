"""Export and import as JSON lines: every memory (every status, so nothing is lost), then
every profile document (lines with "kind": "profile")."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.errors import ProfileRejected, field_errors
from memoryd.memories.checks import MemoryContent
from memoryd.memories.profiles import commit_change, ensure_profiles, load, to_out, validated
from memoryd.memories.store import create_memory, find_by_hash
from memoryd.models.db import lock_scope
from memoryd.models.keys import Scope
from memoryd.models.profiles import ItemMeta, ProfileStatus, ProfileType
from memoryd.models.schemas import Fact, Ident, MemoryOut
from memoryd.models.tables import Actor, Category, Memory, MemoryStatus, Profile, Tier
from memoryd.settings import Settings

EXPORT_CHUNK = 1000


def export_memories(
    session: Session, agent_id: str | None = None, user_id: str | None = None
) -> Iterator[str]:
    """One JSON object per memory, oldest first, streamed in chunks."""
    last = 0
    while True:
        stmt = select(Memory).where(Memory.id > last)
        if agent_id:
            stmt = stmt.where(Memory.agent_id == agent_id)
        if user_id:
            stmt = stmt.where(Memory.user_id == user_id)
        rows = session.scalars(stmt.order_by(Memory.id).limit(EXPORT_CHUNK)).all()
        if not rows:
            break
        for memory in rows:
            yield MemoryOut.from_memory(memory).model_dump_json()
        last = rows[-1].id
    documents = select(Profile).order_by(Profile.id)
    if agent_id:
        documents = documents.where(Profile.agent_id == agent_id)
    if user_id:
        documents = documents.where(Profile.user_id == user_id)
    for profile in session.scalars(documents):
        yield json.dumps({"kind": "profile", **to_out(profile).model_dump(mode="json")})


class ImportRecord(BaseModel):
    """What `memoryd import` accepts per line (an export line is one)."""

    model_config = ConfigDict(extra="ignore")

    agent_id: Ident
    user_id: Ident
    content: MemoryContent = Field(min_length=1, max_length=10_000)
    category: Category = Category.USER
    name: str = Field("", max_length=200)
    tags: list[str] = Field(default_factory=list)
    confidence: float = Field(0.9, ge=0, le=1)
    tier: Tier = Tier.LONG
    status: MemoryStatus = MemoryStatus.ACTIVE
    expires_at: datetime | None = None
    said_at: datetime | None = None
    occurred_at: datetime | None = None


def import_memories(
    session: Session, settings: Settings, lines: Iterable[str], now: datetime
) -> dict[str, object]:
    """Add memories; an active one whose content the scope already holds is skipped.
    Bad lines are reported by number and do not stop the others."""
    imported = skipped = imported_profiles = 0
    errors: list[str] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if isinstance(data, dict) and data.get("kind") == "profile":
                imported_profiles += _import_profile(
                    session, ProfileRecord.model_validate(data), now
                )
                continue
            record = ImportRecord.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(f"{f}: {m}" for f, m in field_errors(exc))
            errors.append(f"line {number}: {problems}")
            continue
        except (json.JSONDecodeError, ProfileRejected) as exc:
            errors.append(f"line {number}: {str(exc).splitlines()[0]}")
            continue
        scope = Scope(record.agent_id, record.user_id)
        lock_scope(session, scope)
        if record.status == MemoryStatus.ACTIVE and find_by_hash(session, scope, record.content):
            skipped += 1
            continue
        fact = Fact(
            content=record.content,
            category=record.category,
            name=record.name,
            tags=record.tags,
            confidence=record.confidence,
            occurred_at=record.occurred_at.date() if record.occurred_at else None,
        )
        memory = create_memory(
            session,
            settings,
            scope,
            fact,
            now,
            actor=Actor.API,
            metadata={"source": "import"},
            force_tier=record.tier,
            said_at=record.said_at,
        )
        memory.status = record.status
        if record.tier == Tier.SHORT:
            memory.expires_at = record.expires_at or memory.expires_at
        imported += 1
    session.flush()
    result: dict[str, object] = {"imported": imported, "skipped": skipped, "errors": errors}
    if imported_profiles:
        result["profiles"] = imported_profiles
    return result


class ProfileRecord(BaseModel):
    """A profile line of an export."""

    model_config = ConfigDict(extra="ignore")

    agent_id: Ident
    user_id: Ident
    type: ProfileType
    status: ProfileStatus = ProfileStatus.ACTIVE
    content: dict[str, Any]
    field_meta: dict[str, ItemMeta] = Field(default_factory=dict)


def _import_profile(session: Session, record: ProfileRecord, now: datetime) -> int:
    """The document as exported, meta included, as one more version of the scope's."""
    scope = Scope(record.agent_id, record.user_id)
    lock_scope(session, scope)
    ensure_profiles(session, scope, now)
    profile = load(session, scope, record.type, lock=True)
    content = validated(record.type, record.content)
    field_meta = {k: v.model_dump(mode="json") for k, v in record.field_meta.items()}
    profile.status = record.status
    commit_change(session, profile, (content, field_meta), Actor.API, now)
    return 1
