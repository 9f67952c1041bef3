"""API keys: created once (shown once), stored as SHA-256, bound to agents.

Keys are 32 random bytes, so a plain SHA-256 is enough to store them: there is nothing
to brute-force, and a lookup stays one indexed read. This module needs no web framework,
so `memoryd keys` works wherever memoryd is installed, and every transport that takes a
key (the HTTP API, the MCP server) checks it, and the scopes it may use, with the same
code.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime

from pydantic import BaseModel, Field
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from memoryd.errors import NotFound
from memoryd.models.db import rowcount, session_scope
from memoryd.models.schemas import Ident
from memoryd.models.tables import SHARED_USER, ApiKey
from memoryd.settings import Settings

KEY_PREFIX = "mk_"
SHOWN_CHARS = 10  # "mk_" and seven more: enough to tell keys apart in a list
NO_KEY = "send the API key as `Authorization: Bearer <key>`"
UNKNOWN_KEY = "unknown or revoked API key"


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

    def allows(self, agent_id: str, user_id: str | None, *, write: bool) -> bool:
        """The one rule every transport applies: may this key read (or write) the scope?"""
        if write and user_id is not None:
            return self.may_write(agent_id, user_id)
        return self.may_use(agent_id, user_id)


def refusal(agent_id: str, user_id: str | None) -> str:
    """What a caller is told when its key may not use a scope."""
    who = f"agent {agent_id!r}" + (f", user {user_id!r}" if user_id is not None else "")
    return f"this key may not use {who}"


def bearer_secret(header: str) -> str | None:
    """The key of an `Authorization: Bearer <key>` header, or None."""
    scheme, _, secret = header.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        return None
    return secret.strip()


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


@dataclass
class KeyCache:
    """Looked-up keys, trusted for `ttl` seconds: a key check on every request would add
    a database round trip to each call; a revoked key stops working within `ttl`."""

    settings: Settings
    ttl: float
    _entries: dict[str, tuple[float, Principal | None]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def cached(self, secret: str) -> tuple[bool, Principal | None]:
        """(whether the key was looked up within `ttl`, what was found then): memory
        only, so a request's event loop may ask without waiting on the database."""
        return self._recent(hash_key(secret))

    def _recent(self, digest: str) -> tuple[bool, Principal | None]:
        with self._lock:
            hit = self._entries.get(digest)
        if hit is not None and hit[0] > time.monotonic():
            return True, hit[1]
        return False, None

    def principal(self, secret: str) -> Principal | None:
        digest = hash_key(secret)
        known, found = self._recent(digest)
        if known:
            return found
        now = time.monotonic()
        with session_scope(self.settings.storage, readonly=True) as session:
            found = lookup(session, secret)
        if self.ttl > 0:
            with self._lock:
                if len(self._entries) > 10_000:  # unknown keys must not grow it forever
                    self._entries.clear()
                self._entries[digest] = (now + self.ttl, found)
        return found


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
