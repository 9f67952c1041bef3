"""The page's sign-in sessions: an admin key exchanged for a random token that expires.

The cookie never holds the key, so a leaked cookie is worth one session, which signing
out deletes; revoking the key ends its sessions at their next request (each request
reads the key with the session, uncached). Tokens are 32 random bytes stored as SHA-256,
as keys are. Needs no web framework.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from memoryd.models.tables import ApiKey, PageSession
from memoryd.server.keys import Principal, hash_key


def open_session(session: Session, principal: Principal, now: datetime, hours: float) -> str:
    """A new session for the key; returns the token (the cookie's value)."""
    token = secrets.token_urlsafe(32)
    session.add(
        PageSession(
            token_hash=hash_key(token),
            key_id=principal.key_id,
            created_at=now,
            expires_at=now + timedelta(hours=hours),
        )
    )
    # Expired sessions go as new ones come: the table holds live sessions only.
    session.execute(delete(PageSession).where(PageSession.expires_at <= now))
    return token


def session_principal(session: Session, token: str, now: datetime) -> Principal | None:
    """The admin a live session stands for, or None (unknown, expired, signed out, or
    its key revoked or no longer admin)."""
    row = session.execute(
        select(ApiKey)
        .join(PageSession, PageSession.key_id == ApiKey.id)
        .where(
            PageSession.token_hash == hash_key(token),
            PageSession.expires_at > now,
            ApiKey.revoked_at.is_(None),
            ApiKey.admin.is_(True),
        )
    ).scalar_one_or_none()
    if row is None:
        return None
    return Principal(row.id, row.name, frozenset(row.agent_ids), row.user_id, row.admin)


def close_session(session: Session, token: str) -> None:
    session.execute(delete(PageSession).where(PageSession.token_hash == hash_key(token)))
