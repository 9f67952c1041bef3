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

from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.models.base import written_in
from memoryd.models.keys import Scope
from memoryd.models.tables import Category, Memory, MemoryStatus

MAX_KEY = 200
# Memories of one key a fact is reconciled with: a single-valued slot holds one (two
# while an old duplicate waits to be retired); a list-like slot may hold a few dozen.
SAME_KEY_LIMIT = 50
CUT_LENGTH = 40  # older names cut from content were 60 or 200 characters long
_SPACE = re.compile(r"\s+")
_EDGE = " \t\n.,;:!?'\"“”‘’()[]{}。，；：！？、（）"


# Keys that hold one value at a time, in English and Chinese; a key ending in one of them
# ("sister anna home city") too. What a model's `single` is checked against when it is not
# trusted (MEMORYD_SMALL_MODEL_CHECKS=true).
KNOWN_SINGLE = frozenset(
    """home city|city|country|address|preferred name|name|nickname|employer|company|job|
    job title|role|occupation|position|diet|partner|spouse|relationship status|birthday|age|
    team lead|manager|boss|surname|school|university|major|timezone|primary language|
    居住城市|城市|住址|名字|姓氏|称呼|昵称|公司|工作|职位|职业|饮食|伴侣|对象|生日|年龄|组长|领导|经理|
    学校|专业|时区""".replace("\n", "")
    .replace("    ", "")
    .split("|")
)


# Categories whose memories of one key are about one subject: a model files "job title"
# under `user` one day and `project` the next (measured with a real small model).
_ABOUT_THE_USER = (Category.USER.value, Category.PROJECT.value)


def key_categories(category: str) -> tuple[str, ...]:
    """The categories a fact of `category` is reconciled with by its key."""
    return _ABOUT_THE_USER if category in _ABOUT_THE_USER else (category,)


def known_single(key: str) -> bool:
    return any(key == k or key.endswith(f" {k}") for k in KNOWN_SINGLE) or key in KNOWN_SINGLE


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
        Memory.of(scope),
        Memory.name_key == key,
        # The partial key index's condition, written in the text: SQLite plans with it
        # only when stated, a prepared statement's generic plan only when not a parameter.
        Memory.name_key != written_in(""),
        Memory.status == written_in(MemoryStatus.ACTIVE),
        Memory.category.in_(key_categories(category)),
    )
    if exclude:
        stmt = stmt.where(Memory.id.not_in(list(exclude)))
    return list(session.scalars(stmt.order_by(Memory.id).limit(SAME_KEY_LIMIT)))
