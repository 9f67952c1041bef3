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
from memoryd.memories.importing import ImportRecord, KnownMemories, import_memory
from memoryd.memories.profiles import commit_change, ensure_profiles, load, to_out, validated
from memoryd.models.db import lock_scope
from memoryd.models.keys import Scope
from memoryd.models.profiles import ItemMeta, ProfileStatus, ProfileType
from memoryd.models.schemas import EventOut, Ident, MemoryOut
from memoryd.models.tables import Actor, Memory, MemoryEvent, Profile
from memoryd.settings import Settings

__all__ = ["ImportRecord", "export_memories", "import_memories"]

EXPORT_CHUNK = 1000


def export_memories(
    session: Session, agent_id: str | None = None, user_id: str | None = None
) -> Iterator[str]:
    """One JSON object per memory, oldest first, streamed in chunks, each with its
    history (`history`: its events, oldest first), so an import keeps it."""
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
        events = _events_of(session, [m.id for m in rows])
        for memory in rows:
            line = MemoryOut.from_memory(memory).model_dump(mode="json")
            line["history"] = events.get(memory.id, [])
            yield json.dumps(line, ensure_ascii=False)
        last = rows[-1].id
    documents = select(Profile).order_by(Profile.id)
    if agent_id:
        documents = documents.where(Profile.agent_id == agent_id)
    if user_id:
        documents = documents.where(Profile.user_id == user_id)
    for profile in session.scalars(documents):
        yield json.dumps({"kind": "profile", **to_out(profile).model_dump(mode="json")})


def _events_of(session: Session, memory_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """The history of a chunk of memories in one query, per memory, oldest first."""
    events: dict[int, list[dict[str, Any]]] = {}
    stmt = select(MemoryEvent).where(MemoryEvent.memory_id.in_(memory_ids))
    for event in session.scalars(stmt.order_by(MemoryEvent.id)):
        out = EventOut.model_validate(event).model_dump(mode="json", exclude={"id", "memory_id"})
        events.setdefault(event.memory_id, []).append(out)
    return events


def import_memories(
    session: Session, settings: Settings, lines: Iterable[str], now: datetime
) -> dict[str, object]:
    """Add memories, idempotently: a memory the scope already holds (the same one, by the
    identity its export carries, or an active one with the same content) is skipped.
    Bad lines are reported by number and do not stop the others."""
    imported = skipped = imported_profiles = 0
    errors: list[str] = []
    known = KnownMemories(session)
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
        if import_memory(session, settings, record, known, now):
            imported += 1
        else:
            skipped += 1
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
