"""Profile documents: read, PUT, PATCH (RFC 7396) and their history.

Every scope has both documents from its first use (`ensure_profiles`). Every change,
whoever makes it, goes through `commit_change`: the new document is validated, the
merge patch from the old one is recorded as an event, the version moves on. Rows are
read under a lock before they are changed, so two writers of one profile queue instead
of losing an update. The agent's shared `*` scope is written only by calls that say
`shared=True`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, tzinfo
from typing import Any

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.errors import NotFound, ProfileRejected, field_errors
from memoryd.memories import merge_patch
from memoryd.memories.store import check_writable
from memoryd.models.dialect import for_update, upsert
from memoryd.models.keys import Scope
from memoryd.models.profiles import (
    CONTENT_MODELS,
    ItemMeta,
    ProfileEventOut,
    ProfileOut,
    ProfileStatus,
    ProfileType,
    default_content,
)
from memoryd.models.schemas import INTEGER_MAX, MAX_PAGE, history_page
from memoryd.models.tables import Actor, Profile, ProfileEvent
from memoryd.zones import user_zone

ITEM_KEY = "name"  # list items (people, places, projects, …) are told apart by name


def ensure_profiles(session: Session, scope: Scope, now: datetime) -> None:
    """Both documents exist for this scope from now on (seed 001's registration rule)."""
    insert = upsert(session)
    rows = [
        {
            "agent_id": scope.agent_id,
            "user_id": scope.user_id,
            "type": kind,
            "status": ProfileStatus.ACTIVE,
            "content": default_content(kind),
            "field_meta": {},
            "version": 0,
            "created_at": now,
            "updated_at": now,
        }
        for kind in ProfileType
    ]
    session.execute(
        insert(Profile).on_conflict_do_nothing(index_elements=["agent_id", "user_id", "type"]),
        rows,
    )


def load(session: Session, scope: Scope, kind: ProfileType, *, lock: bool = False) -> Profile:
    stmt = select(Profile).where(Profile.of(scope), Profile.type == kind)
    if lock:
        stmt = for_update(session, stmt.execution_options(populate_existing=True))
    profile = session.scalars(stmt).first()
    if profile is None:
        raise NotFound(f"no {kind} profile for {scope.agent_id!r}/{scope.user_id!r}")
    return profile


def to_out(profile: Profile) -> ProfileOut:
    return ProfileOut(
        agent_id=profile.agent_id,
        user_id=profile.user_id,
        type=ProfileType(profile.type),
        status=ProfileStatus(profile.status),
        content=profile.content,
        field_meta={k: ItemMeta.model_validate(v) for k, v in profile.field_meta.items()},
        version=profile.version,
        updated_at=profile.updated_at,
    )


def get_profile(session: Session, scope: Scope, kind: ProfileType, now: datetime) -> ProfileOut:
    """The document; a scope that never wrote one reads the empty document (reads never
    write, so they stay read-only transactions)."""
    try:
        return to_out(load(session, scope, kind))
    except NotFound:
        return ProfileOut(
            agent_id=scope.agent_id,
            user_id=scope.user_id,
            type=kind,
            status=ProfileStatus.ACTIVE,
            content=default_content(kind),
            field_meta={},
            version=0,
            updated_at=now,
        )


def user_timezone(session: Session, scope: Scope) -> tzinfo:
    """The zone the scope's user profile names (UTC when none): what "today" means to the
    user, on the read side as in extraction."""
    content = session.scalar(
        select(Profile.content).where(Profile.of(scope), Profile.type == ProfileType.USER)
    )
    return user_zone({"user": content})


def validated(kind: ProfileType, content: Any) -> dict[str, Any]:
    """The document in its normal form, or ProfileRejected naming each bad field."""
    try:
        return CONTENT_MODELS[kind].model_validate(content).model_dump(mode="json")
    except ValidationError as exc:
        problems = [{"field": f or "content", "message": m} for f, m in field_errors(exc)]
        raise ProfileRejected(
            "; ".join(f"{p['field']}: {p['message']}" for p in problems), problems, exc
        ) from None


def put_profile(
    session: Session,
    scope: Scope,
    kind: ProfileType,
    content: Mapping[str, Any],
    now: datetime,
    *,
    shared: bool = False,
) -> ProfileOut:
    """Replace the whole document (seed 001's PUT)."""
    return _edit(session, scope, kind, now, shared, lambda _old: dict(content))


def patch_profile(
    session: Session,
    scope: Scope,
    kind: ProfileType,
    patch: Mapping[str, Any],
    now: datetime,
    *,
    shared: bool = False,
) -> ProfileOut:
    """Apply a JSON Merge Patch (RFC 7396) to the document (seed 001's PATCH)."""
    return _edit(session, scope, kind, now, shared, lambda old: merge_patch.apply(old, dict(patch)))


def _edit(
    session: Session,
    scope: Scope,
    kind: ProfileType,
    now: datetime,
    shared: bool,
    new_content: Callable[[dict[str, Any]], Any],
) -> ProfileOut:
    """An API edit: the new document is computed from the current one under its lock."""
    check_writable(scope, shared)
    ensure_profiles(session, scope, now)
    profile = load(session, scope, kind, lock=True)
    new = validated(kind, new_content(profile.content))
    commit_change(session, profile, _stamped(profile, new, now), Actor.API, now)
    return to_out(profile)


def set_status(
    session: Session,
    scope: Scope,
    kind: ProfileType,
    status: ProfileStatus,
    now: datetime,
    *,
    shared: bool = False,
) -> ProfileOut:
    """A disabled profile is neither rendered into prompts nor updated by extraction."""
    check_writable(scope, shared)
    ensure_profiles(session, scope, now)
    profile = load(session, scope, kind, lock=True)
    profile.status = status
    profile.updated_at = now
    session.flush()
    return to_out(profile)


def _stamped(
    profile: Profile, new: dict[str, Any], now: datetime
) -> tuple[dict[str, Any], dict[str, Any]]:
    """An API edit: the fields and items it changed get meta {source: api, now}; an item
    sent back unchanged keeps its meta even if the client left `meta` out."""
    meta = ItemMeta(source="api", confidence=1.0, last_updated_at=now).model_dump(mode="json")
    default_meta = ItemMeta().model_dump(mode="json")
    field_meta = dict(profile.field_meta)
    for path, before, after in _changed_fields(profile.content, new):
        if isinstance(after, list) and all(isinstance(i, dict) and ITEM_KEY in i for i in after):
            old_items = {
                i[ITEM_KEY]: i for i in before or [] if isinstance(i, dict) and ITEM_KEY in i
            }
            for item in after:
                old = old_items.get(item[ITEM_KEY])
                if old is not None and _without_meta(old) == _without_meta(item):
                    item["meta"] = old.get("meta", default_meta)
                elif item.get("meta") == default_meta:
                    item["meta"] = meta
        else:
            field_meta[path] = meta
    return new, field_meta


def _without_meta(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "meta"}


def _changed_fields(
    old: dict[str, Any], new: dict[str, Any], prefix: str = ""
) -> list[tuple[str, Any, Any]]:
    """(dotted path, before, after) of every leaf field that differs; lists are leaves."""
    changed = []
    for key, after in new.items():
        before = old.get(key)
        path = f"{prefix}{key}"
        if isinstance(after, dict) and isinstance(before, dict):
            changed += _changed_fields(before, after, f"{path}.")
        elif before != after:
            changed.append((path, before, after))
    return changed


def commit_change(
    session: Session,
    profile: Profile,
    change: tuple[dict[str, Any], dict[str, Any]],
    actor: Actor,
    now: datetime,
    batch_id: int | None = None,
) -> bool:
    """Store a new version of a (locked) profile and its history event. False, and
    nothing written, when it changes nothing."""
    content, field_meta = change
    patch = merge_patch.diff(profile.content, content)
    meta_patch = merge_patch.diff(profile.field_meta, field_meta)
    if not patch and not meta_patch:
        return False
    profile.content = content
    profile.field_meta = field_meta
    profile.version += 1
    profile.updated_at = now
    session.add(
        ProfileEvent(
            profile_id=profile.id,
            agent_id=profile.agent_id,
            user_id=profile.user_id,
            version=profile.version,
            actor=actor,
            batch_id=batch_id,
            patch=patch,
            meta_patch=meta_patch,
            created_at=now,
        )
    )
    session.flush()
    return True


def history(
    session: Session, scope: Scope, kind: ProfileType, after: int = 0, limit: int = MAX_PAGE
) -> list[ProfileEventOut]:
    """Oldest first, the changes after version `after`; `limit` 1 to MAX_PAGE."""
    limit = history_page(limit)
    if after >= INTEGER_MAX:  # versions are 32-bit
        return []
    try:
        profile = load(session, scope, kind)
    except NotFound:
        return []
    events = session.scalars(
        select(ProfileEvent)
        .where(ProfileEvent.profile_id == profile.id, ProfileEvent.version > after)
        .order_by(ProfileEvent.version)
        .limit(limit)
    )
    return [ProfileEventOut.model_validate(e, from_attributes=True) for e in events]
