"""What a memory is about: its subject key, the normalised form of its name.

A fact's `name` names the slot it fills ("home city", "preferred name", "employer"). Two
memories with the same key are about the same thing whether or not their words overlap
("Lives in Lisbon" and "Moved to Porto"), so reconciliation looks them up by key, through
an index, at any scope size; lexical search alone cannot connect them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from memoryd.memo import RecentMemo
from memoryd.models.keys import Scope
from memoryd.models.tables import Memory, MemoryStatus

MAX_KEY = 200
# Memories of one key a fact is reconciled with: a single-valued slot holds one (two
# while an old duplicate waits to be retired); a list-like slot may hold a few dozen.
SAME_KEY_LIMIT = 50
# scope_keys reads the keys of this many of the scope's most recently updated keyed
# memories: its cost stays that of a small scope at any size.
KEY_WINDOW = 500
KEYS_REUSE_SECONDS = 30.0
_recent_keys: RecentMemo[tuple[str, ...]] = RecentMemo(KEYS_REUSE_SECONDS)
CUT_LENGTH = 40  # older names cut from content were 60 or 200 characters long
_SPACE = re.compile(r"\s+")
_EDGE = " \t\n.,;:!?'\"“”‘’()[]{}。，；：！？、（）"


def subject_key(name: str) -> str:
    """ "Home  City." and "home city" are one key: NFKC, case-folded, spaces collapsed,
    punctuation trimmed from the ends."""
    key = _SPACE.sub(" ", unicodedata.normalize("NFKC", name).casefold())
    return key.strip(_EDGE)[:MAX_KEY]


def is_content_cut(name: str, content: str) -> bool:
    """A title that only repeats the content, or its head, is no key: older memories and
    direct saves without a name stored the content or its first 60 or 200 characters as
    their name. A short word that happens to start the content ("Employer") is a key."""
    name, content = name.strip(), content.strip()
    if not name or not content.startswith(name):
        return False
    return len(name) == len(content) or len(name) >= CUT_LENGTH


def key_for(name: str, content: str) -> str:
    """The subject key a memory with this name and content is stored under ('' for none)."""
    return "" if not name.strip() or is_content_cut(name, content) else subject_key(name)


def same_key_memories(
    session: Session, scope: Scope, key: str, category: str, exclude: Sequence[int] = ()
) -> list[Memory]:
    """The scope's own active memories of one key and category, oldest first, by index."""
    if not key:
        return []
    stmt = select(Memory).where(
        Memory.agent_id == scope.agent_id,
        Memory.user_id == scope.user_id,
        Memory.name_key == key,
        Memory.name_key != "",  # stated, so SQLite plans with the partial key index
        Memory.status == MemoryStatus.ACTIVE,
        Memory.category == category,
    )
    if exclude:
        stmt = stmt.where(Memory.id.not_in(list(exclude)))
    return list(session.scalars(stmt.order_by(Memory.id).limit(SAME_KEY_LIMIT)))


def scope_keys(session: Session, scope: Scope, limit: int) -> list[str]:
    """The keys the scope uses most among its KEY_WINDOW most recently updated keyed
    memories, so an extractor reuses one instead of a synonym. Bounded: a key not
    touched in that long still retires by its own lookup (same_key_memories), only it
    is not suggested. A full window's answer is reused for KEYS_REUSE_SECONDS."""
    if limit <= 0:
        return []
    memo_key = (str(session.connection().engine.url), scope, limit)
    recent = _recent_keys.get(memo_key)
    if recent is not None:
        return list(recent)
    window = (
        select(Memory.name_key)
        .where(
            Memory.agent_id == scope.agent_id,
            Memory.user_id == scope.user_id,
            Memory.status == MemoryStatus.ACTIVE,
            Memory.name_key != "",
        )
        .order_by(Memory.updated_at.desc())
        .limit(KEY_WINDOW)
        .subquery()
    )
    uses = func.count().label("uses")
    read = func.sum(func.count()).over().label("read")  # the window's memories, all keys
    counted = select(window.c.name_key, uses, read).group_by(window.c.name_key)
    stmt = counted.order_by(uses.desc(), window.c.name_key).limit(limit)
    rows = session.execute(stmt).all()
    keys = [row.name_key for row in rows]
    if rows and rows[0].read >= KEY_WINDOW:
        _recent_keys.put(memo_key, tuple(keys))
    return keys
