"""API keys: created once (shown once), stored as SHA-256, bound to agents.

Keys are 32 random bytes, so a plain SHA-256 is enough to store them: there is nothing
to brute-force, and a lookup stays one indexed read. This module needs no web framework,
so `memoryd keys` works wherever memoryd is installed.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, Field
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from memoryd.errors import NotFound
from memoryd.models.db import rowcount
from memoryd.models.schemas import Ident
from memoryd.models.tables import SHARED_USER, ApiKey

KEY_PREFIX = "mk_"
SHOWN_CHARS = 10  # "mk_" and seven more: enough to tell keys apart in a list


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: the scopes its key may use."""

    key_id: int
    name: str
    agent_ids: frozenset[str]
    user_id: str | None
    admin: bool

    def may_use(self, agent_id: str, user_id: str | None = None) -> bool:
        """A key bound to a user may also read its agent's shared `*` scope."""
        if self.admin:
            return True
        if agent_id not in self.agent_ids:
            return False
        return self.user_id is None or user_id is None or user_id in (self.user_id, SHARED_USER)

    def may_write(self, agent_id: str, user_id: str) -> bool:
        """Writing the shared scope takes a key not bound to one user."""
        if self.user_id is not None and user_id == SHARED_USER:
            return self.admin
        return self.may_use(agent_id, user_id)


class KeySpec(BaseModel):
    """What a new key may do."""

    name: Ident
    agent_ids: list[Ident] = Field(default_factory=list)
    user_id: Ident | None = None
    admin: bool = False


class KeyOut(BaseModel):
    id: int
    name: str
    prefix: str
    agent_ids: list[str]
    user_id: str | None
    admin: bool
    created_at: datetime
    revoked_at: datetime | None


def create_key(session: Session, spec: KeySpec, now: datetime) -> tuple[KeyOut, str]:
    """A new key; the returned secret is the only time anyone sees it."""
    if not spec.admin and not spec.agent_ids:
        raise ValueError("a key needs at least one agent (or --admin)")
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    row = ApiKey(
        name=spec.name,
        prefix=secret[:SHOWN_CHARS],
        key_hash=hash_key(secret),
        agent_ids=sorted(set(spec.agent_ids)),
        user_id=spec.user_id,
        admin=spec.admin,
        created_at=now,
    )
    session.add(row)
    session.flush()
    return _out(row), secret


def list_keys(session: Session) -> list[KeyOut]:
    return [_out(k) for k in session.scalars(select(ApiKey).order_by(ApiKey.id))]


def revoke_key(session: Session, key_id: int, now: datetime) -> None:
    res = session.execute(
        update(ApiKey)
        .where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None))
        .values(revoked_at=now)
    )
    if not rowcount(res) and session.get(ApiKey, key_id) is None:
        raise NotFound(f"no API key {key_id}")


def lookup(session: Session, secret: str) -> Principal | None:
    """The live key with this secret, or None (unknown or revoked)."""
    row = session.scalars(
        select(ApiKey).where(ApiKey.key_hash == hash_key(secret), ApiKey.revoked_at.is_(None))
    ).first()
    if row is None:
        return None
    return Principal(row.id, row.name, frozenset(row.agent_ids), row.user_id, row.admin)


def _out(row: ApiKey) -> KeyOut:
    return KeyOut(
        id=row.id,
        name=row.name,
        prefix=row.prefix,
        agent_ids=list(row.agent_ids),
        user_id=row.user_id,
        admin=row.admin,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
    )
