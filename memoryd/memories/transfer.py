"""Export and import as JSON lines: every memory (every status, so nothing is lost), then
every profile document (lines with "kind": "profile")."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.errors import ProfileRejected, field_errors
from memoryd.memories.importing import MAX_HISTORY, ImportRecord, KnownMemories, import_memory
from memoryd.memories.profiles import commit_change, ensure_profiles, load, to_out, validated
from memoryd.models.coordination import lock_scope
from memoryd.models.db import session_scope
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
        stmt = select(Memory).where(Memory.id > last, *Memory.matching(agent_id, user_id))
        rows = session.scalars(stmt.order_by(Memory.id).limit(EXPORT_CHUNK)).all()
        if not rows:
            break
        events = _events_of(session, [m.id for m in rows])
        for memory in rows:
            line = MemoryOut.from_memory(memory).model_dump(mode="json")
            line["history"] = events.get(memory.id, [])
            yield json.dumps(line, ensure_ascii=False)
        last = rows[-1].id
    documents = select(Profile).where(*Profile.matching(agent_id, user_id)).order_by(Profile.id)
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


IMPORT_CHUNK = 200  # lines per transaction


@dataclass
class ImportResult:
    imported: int = 0
    skipped: int = 0
    profiles: int = 0
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "imported": self.imported,
            "skipped": self.skipped,
            "errors": self.errors,
        }
        if self.profiles:
            out["profiles"] = self.profiles
        return out


def import_memories(
    settings: Settings, lines: Iterable[str], now: datetime, chunk: int = IMPORT_CHUNK
) -> dict[str, object]:
    """Add memories, idempotently: a memory the scope already holds (the same one, by the
    identity its export carries, or an active one with the same content) is skipped.
    Bad lines are reported by number and do not stop the others.

    Each `chunk` lines are one transaction (_chunks), their scopes locked in sorted order
    (the one order every path takes scope locks in): a large file never holds every scope
    it touches until its end, and a failure keeps the chunks before it, which importing
    the file again skips."""
    result = ImportResult()
    for records in _chunks(lines, result, chunk):
        records.sort(key=lambda r: (r.agent_id, r.user_id))  # stable: file order per scope
        with session_scope(settings.storage) as session:
            known = KnownMemories()  # read again under this chunk's scope locks
            for record in records:
                if isinstance(record, ProfileRecord):
                    result.profiles += _import_profile(session, record, now)
                elif import_memory(session, settings, record, known, now):
                    result.imported += 1
                else:
                    result.skipped += 1
    return result.as_dict()


def _chunks(
    lines: Iterable[str], result: ImportResult, chunk: int
) -> Iterator[list[ImportRecord | ProfileRecord]]:
    """The file's records, `chunk` lines at a time, or fewer once their histories hold
    MAX_HISTORY events between them: a transaction holds as many events as one memory
    may, never `chunk` times that."""
    part: list[ImportRecord | ProfileRecord] = []
    read = events = 0
    for number, line in enumerate(lines, 1):
        record = _parse(number, line, result)
        read += 1
        if record is not None:
            part.append(record)
            events += len(getattr(record, "history", ()))
        if read == chunk or events >= MAX_HISTORY:
            if part:
                yield part
            part, read, events = [], 0, 0
    if part:
        yield part


def _parse(number: int, line: str, result: ImportResult) -> ImportRecord | ProfileRecord | None:
    """The line's record, or None (a blank line, or a mistake reported by line number)."""
    if not line.strip():
        return None
    try:
        data = json.loads(line)
        if isinstance(data, dict) and data.get("kind") == "profile":
            profile = ProfileRecord.model_validate(data)
            validated(profile.type, profile.content)
            return profile
        return ImportRecord.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{f}: {m}" for f, m in field_errors(exc))
        result.errors.append(f"line {number}: {problems}")
    except (json.JSONDecodeError, ProfileRejected) as exc:
        result.errors.append(f"line {number}: {str(exc).splitlines()[0]}")
    return None


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
