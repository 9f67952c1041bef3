"""Profile updates proposed by extraction: gated, checked against what is known, applied.

An update sets a field, or adds, updates or removes a list entry (a string, or an item
told apart by its name). It never overwrites a value that is more confident or newer
(by when the user said it) than itself, unless the turn says the value changed
("I moved to Lisbon"): what a person told the API stays until they change it again.
"""

from __future__ import annotations

import copy
import json
import typing
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any

from sqlalchemy.orm import Session

from memoryd.errors import ProfileRejected
from memoryd.memories import merge_patch
from memoryd.memories.profiles import ITEM_KEY, commit_change, ensure_profiles, load, validated
from memoryd.memories.store import check_writable
from memoryd.models.keys import Scope
from memoryd.models.profiles import (
    CONTENT_MODELS,
    ItemMeta,
    ProfileStatus,
    ProfileType,
    ProfileUpdate,
)
from memoryd.models.tables import Actor
from memoryd.settings import ExtractionSettings
from memoryd.text import holds_secret


def apply_updates(
    session: Session,
    settings: ExtractionSettings,
    scope: Scope,
    updates: Sequence[ProfileUpdate],
    said_at: datetime,
    now: datetime,
    *,
    actor: Actor = Actor.EXTRACTOR,
    source: str = "extractor",
    batch_id: int | None = None,
) -> tuple[int, Counter[str]]:
    """Apply what passes the gate and the conflict rule to the scope's (locked) profiles.
    Returns how many updates were applied and every rejection by its reason."""
    check_writable(scope, shared=False)  # the shared scope is written by explicit calls only
    rejected: Counter[str] = Counter()
    kept: list[ProfileUpdate] = []
    for update in updates:
        if update.confidence < settings.min_confidence:
            rejected["low_confidence"] += 1
        elif holds_secret(json.dumps(update.value, ensure_ascii=False, default=str)):
            rejected["secret"] += 1
        else:
            kept.append(update)
    if not kept:
        return 0, rejected
    ensure_profiles(session, scope, now)
    applied = 0
    for kind in ProfileType:
        mine = [u for u in kept if u.profile == kind]
        if not mine:
            continue
        profile = load(session, scope, kind, lock=True)
        if profile.status == ProfileStatus.DISABLED:
            rejected["profile_disabled"] += len(mine)
            continue
        meta = ItemMeta(source=source, confidence=1.0, last_updated_at=said_at)
        doc = _Doc(kind, copy.deepcopy(profile.content), dict(profile.field_meta))
        for update in mine:
            reason = doc.apply(update, meta.model_copy(update={"confidence": update.confidence}))
            if reason:
                rejected[reason] += 1
            else:
                applied += 1
        commit_change(session, profile, (doc.content, doc.field_meta), actor, now, batch_id)
    return applied, rejected


class _Doc:
    """A working copy of one document; each update is applied to it or refused whole."""

    def __init__(self, kind: ProfileType, content: dict[str, Any], field_meta: dict[str, Any]):
        self.kind = kind
        self.content = content
        self.field_meta = field_meta

    def apply(self, update: ProfileUpdate, meta: ItemMeta) -> str | None:
        """None when applied, else the reason it was not."""
        current = self._get(update.path)
        if current is _MISSING:
            return "unknown_field"
        shape = _list_shape(self.kind, update.path)
        value: Any
        if update.op != "set" and shape == "items":
            value, reason = _item_change(current, update, meta)
        elif update.op != "set" and shape == "strings":
            value, reason = _string_change(current, update)
        elif update.op == "set" and shape != "items":
            known = self.field_meta.get(update.path)
            if known and not _may_replace(ItemMeta.model_validate(known), update, meta):
                return "kept_current"
            value, reason = update.value, None
        else:
            return "wrong_op"
        if reason:
            return reason
        try:
            patched = merge_patch.apply(self.content, _nest(update.path, value))
            self.content = validated(self.kind, patched)
        except ProfileRejected:
            return "invalid_value"
        if update.op == "set":
            self.field_meta[update.path] = meta.model_dump(mode="json")
        return None

    def _get(self, path: str) -> Any:
        node: Any = self.content
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return _MISSING
            node = node[part]
        return node


_MISSING = object()


def _list_shape(kind: ProfileType, path: str) -> str | None:
    """ "items" (entries told apart by name), "strings", "other" (windows, numbers) or
    None (not a list), from the document's model."""
    annotation: Any = CONTENT_MODELS[kind]
    for part in path.split("."):
        annotation = annotation.model_fields[part].annotation
    if typing.get_origin(annotation) is not list:
        return None
    (item,) = typing.get_args(annotation)
    if typing.get_origin(item) is Annotated:
        item = typing.get_args(item)[0]
    if item is str:
        return "strings"
    return "items" if ITEM_KEY in getattr(item, "model_fields", {}) else "other"


def _may_replace(known: ItemMeta, update: ProfileUpdate, meta: ItemMeta) -> bool:
    """The conflict rule: a surer or newer value stays unless the turn says it changed."""
    if update.changed:
        return True
    newer = (
        known.last_updated_at
        and meta.last_updated_at
        and known.last_updated_at > meta.last_updated_at
    )
    return not newer and known.confidence <= update.confidence


def _nest(path: str, value: Any) -> dict[str, Any]:
    """{"a": {"b": value}} for "a.b". A list value replaces the list (RFC 7396)."""
    for part in reversed(path.split(".")):
        value = {part: value}
    return value  # type: ignore[no-any-return]


def _string_change(current: list[str], update: ProfileUpdate) -> tuple[list[str], str | None]:
    text = str(update.key if update.op == "remove" and update.key else update.value or "").strip()
    if not text:
        return current, "invalid_value"
    if update.op == "remove":
        return [s for s in current if s.casefold() != text.casefold()], None
    present = any(s.casefold() == text.casefold() for s in current)
    return (current if present else [*current, text]), None


def _item_change(
    current: list[dict[str, Any]], update: ProfileUpdate, meta: ItemMeta
) -> tuple[list[dict[str, Any]], str | None]:
    """Add, update or remove the entry named `key` (or value["name"]), names compared
    without case."""
    value = update.value if isinstance(update.value, dict) else {}
    name = str(update.key or value.get(ITEM_KEY) or "").strip()
    if not name:
        return current, "invalid_value"
    names = [str(item.get(ITEM_KEY, "")).casefold() for item in current]
    index = names.index(name.casefold()) if name.casefold() in names else None
    if index is not None:
        known = ItemMeta.model_validate(current[index].get("meta") or {})
        if not _may_replace(known, update, meta):
            return current, "kept_current"
    items = list(current)
    if update.op == "remove":
        if index is None:
            return current, "unknown_item"
        del items[index]
        return items, None
    fields = {k: v for k, v in value.items() if k not in ("meta", ITEM_KEY)}
    stamped = {"meta": meta.model_dump(mode="json")}
    if index is None:
        items.append({ITEM_KEY: name, **fields, **stamped})
    else:
        items[index] = merge_patch.apply(items[index], {**fields, **stamped})
    return items, None
