"""The one lease mechanism: a session row names the batch allowed to work on the
session, until a time on the database's clock (coordination.database_time). Extraction
and compression each hold a lease of their own (their own pair of columns), so a
compression run never waits for an extraction and neither runs twice at once.

Every rule is written once, here: a lease is free when it names no batch or has run
out; taking one is a compare-and-set; only the batch it names may renew or release it,
so a batch that outlived its lease and was overtaken learns it from a write that
changes no row, and writes nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, update
from sqlalchemy.orm import InstrumentedAttribute, Session
from sqlalchemy.sql.elements import ColumnElement

from memoryd.models.db import rowcount
from memoryd.models.keys import SessionKey, session_pk
from memoryd.models.tables import ChatSession
from memoryd.settings import ExtractionSettings


@dataclass(frozen=True)
class SessionLease:
    holder: InstrumentedAttribute[int | None]  # the batch the lease names
    until: InstrumentedAttribute[datetime | None]  # when it runs out

    def free(self, now: datetime) -> ColumnElement[bool]:
        return or_(self.holder.is_(None), self.until.is_(None), self.until <= now)

    def is_live(self, chat: ChatSession, now: datetime) -> bool:
        """Whether a loaded session row's lease is held (the caller holds the row lock)."""
        until = getattr(chat, self.until.key)
        return getattr(chat, self.holder.key) is not None and until is not None and until > now

    def held_by(self, key: SessionKey, batch_id: int) -> tuple[ColumnElement[bool], ...]:
        """The session row, while its lease names this batch: the condition of every
        write a lease holder makes to it."""
        return (*session_pk(key), self.holder == batch_id)

    def taken_by(
        self, settings: ExtractionSettings, batch_id: int, now: datetime
    ) -> dict[str, Any]:
        return {self.holder.key: batch_id, self.until.key: _expiry(settings, now)}

    def released(self) -> dict[str, None]:
        """The values that free the lease, to set with the holder's last write."""
        return {self.holder.key: None, self.until.key: None}

    def take(
        self,
        session: Session,
        settings: ExtractionSettings,
        key: SessionKey,
        batch_id: int,
        now: datetime,
        *conditions: ColumnElement[bool],
    ) -> bool:
        """Compare-and-set: the lease becomes this batch's if it is free (and
        `conditions` hold); False if another batch holds it."""
        taken = session.execute(
            update(ChatSession)
            .where(*session_pk(key), self.free(now), *conditions)
            .values(self.taken_by(settings, batch_id, now))
        )
        return rowcount(taken) == 1

    def renew(
        self,
        session: Session,
        settings: ExtractionSettings,
        key: SessionKey,
        batch_id: int,
        now: datetime,
    ) -> bool:
        """Extend the lease this batch holds; False if it no longer holds it."""
        renewed = session.execute(
            update(ChatSession)
            .where(*self.held_by(key, batch_id))
            .values({self.until.key: _expiry(settings, now)})
        )
        return rowcount(renewed) == 1

    def release(self, session: Session, key: SessionKey, batch_id: int) -> bool:
        """Give the lease back; False if this batch no longer held it."""
        released = session.execute(
            update(ChatSession).where(*self.held_by(key, batch_id)).values(self.released())
        )
        return rowcount(released) == 1


def _expiry(settings: ExtractionSettings, now: datetime) -> datetime:
    return now + timedelta(seconds=settings.lease_seconds)


EXTRACTION_LEASE = SessionLease(ChatSession.lease_batch_id, ChatSession.lease_until)
COMPRESSION_LEASE = SessionLease(ChatSession.compress_batch_id, ChatSession.compress_lease_until)
