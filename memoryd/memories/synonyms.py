"""Two names of one subject: which keys of a scope a new key may be another name of.

Models name one slot many ways ("home city", "city of residence", "居住城市"). A new key
that the scope does not hold is compared with the keys it does:
- an explicit rule, SLOTS: keys listed in one group name one slot, in English and
  Chinese. The rule alone may land a fact on the scope's key (extraction/resolve.py);
- the same words: keys that differ only by words saying the value is new ("diet
  update", "diet") or by their order and repetition are one key, also without a call;
- close keys: keys sharing a content word (stemmed; for Chinese, a pair of characters)
  once the words any key may hold ("my", "current", "favourite") are set aside. Those
  are only candidates: the follow-up call shows the model their memories, and only its
  answer links the two (never similarity alone).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from memoryd.memories.subjects import known_single, subject_key
from memoryd.text import search_tokens

# Each line is one slot: its names, separated by '|'.
_SLOTS = """
home city|city|current city|city of residence|residence|place of residence|where i live|
city i live in|location|current location|living city|居住城市|城市|所在城市|现居城市|常住城市|
居住地|住的城市
address|home address|street address|住址|家庭住址|地址|家庭地址
preferred name|what to call me|form of address|how to address me|称呼|怎么称呼|希望的称呼
name|full name|legal name|名字|姓名|全名
surname|last name|family name|姓|姓氏
employer|company|workplace|current employer|company i work for|place of work|work place|
公司|工作单位|单位|雇主|所在公司|就职公司
job title|job|role|occupation|position|profession|title|current job|current role|
职位|职业|工作|岗位|职务
diet|dietary preference|diet type|eating habits|饮食|饮食习惯|饮食偏好|饮食方式
partner|spouse|significant other|boyfriend|girlfriend|husband|wife|伴侣|对象|男朋友|女朋友|
丈夫|妻子|老公|老婆|relationship status|marital status|dating|感情状况|婚姻状况|恋爱状态
team lead|lead|manager|boss|supervisor|team leader|line manager|direct manager|
组长|领导|经理|上司|主管|直属领导
birthday|date of birth|birth date|生日|出生日期
age|年龄
timezone|time zone|时区
primary language|native language|first language|mother tongue|母语
school|university|college|alma mater|学校|大学
major|field of study|subject of study|专业
phone number|phone|mobile number|cell number|手机号|手机号码|电话|电话号码
email|email address|e-mail|邮箱|电子邮箱|邮件地址
pet|pets|宠物
"""
# What people most often name a favourite of, in Chinese and in English.
_FAVOURITES = {
    "食物": "food",
    "菜": "dish",
    "颜色": "colour color",
    "乐队": "band",
    "歌手": "singer",
    "歌": "song",
    "运动": "sport",
    "书": "book",
    "电影": "film movie",
    "饮料": "drink",
    "季节": "season",
    "游戏": "game",
    "城市": "city",
    "动物": "animal",
    "水果": "fruit",
    "餐厅": "restaurant",
}
_FAVOURITE_SLOTS = "\n".join(
    "|".join(
        [f"最喜欢的{zh}", f"最爱的{zh}"]
        + [f"{w} {x}" for x in en.split() for w in ("favourite", "favorite")]
    )
    for zh, en in _FAVOURITES.items()
)
_GROUPS: dict[str, int] = {}
_LINES = f"{_SLOTS}\n{_FAVOURITE_SLOTS}".replace("|\n", "|").strip().splitlines()
for _number, _line in enumerate(_LINES):
    for _name in _line.split("|"):
        _GROUPS[subject_key(_name)] = _number
_SINGLE_SLOTS = frozenset(n for name, n in _GROUPS.items() if known_single(name))

# Words a key of any subject may hold: they make no two keys alike.
_KEY_STOP = frozenset(
    search_tokens(
        "my current currently favourite favorite fav preferred prefer preference "
        "user user's main primary usual new old like likes most best 最 喜欢 我 的 现在"
    )
)
# Words that say a value is the present one or changed, not what it is a value of:
# "diet update" is "diet", "current city" is "city". Narrower than _KEY_STOP, as
# same_words lands a fact on a key with no call ("preferred name" is no "name").
_NOW_WORDS = frozenset(
    search_tokens(
        "my current currently new now latest update updated updates change changed changes "
        "我 的 现在 目前 最新 更新 变化"
    )
)


def slot_of(key: str) -> int | None:
    """The rule's slot a key names, if any."""
    return _GROUPS.get(key)


def single_valued(key: str) -> bool:
    """Whether a key holds one value: known so, or another name of a slot that is ("lead"
    is "team lead", "男朋友" is "伴侣")."""
    slot = slot_of(key)
    return known_single(key) or (slot is not None and slot in _SINGLE_SLOTS)


def slot_name(key: str) -> str:
    """One name for all the names of a rule's slot (the key itself when it names none)."""
    slot = slot_of(key)
    return key if slot is None else _LINES[slot].split("|")[0]


@lru_cache(maxsize=65_536)
def _asking_terms(key: str) -> tuple[frozenset[str], ...]:
    """The word sets a question may name a key by: its own, and each name of its slot."""
    slot = slot_of(key)
    names = [key] if slot is None else _LINES[slot].split("|")
    return tuple(t for t in {key_terms(subject_key(n)) for n in names} if t)


def key_asked(key: str, terms: frozenset[str]) -> bool:
    """Whether a question of these search terms names the key ("who is my manager?"
    names "team lead"): all the words of one of its names are in it."""
    return any(names <= terms for names in _asking_terms(key))


def asked_slot_keys(terms: frozenset[str]) -> list[str]:
    """Every name of each slot the question names, as keys: the keys its memories may
    be stored under ("manager" asked: "team lead", "lead", "组长", …)."""
    asked = {slot for words, slot in _slot_words() if words <= terms}
    return [name for name, slot in _GROUPS.items() if slot in asked]


@lru_cache(maxsize=1)
def _slot_words() -> tuple[tuple[frozenset[str], int], ...]:
    """Each slot name's words, with its slot (built on first use: a recall that names
    no slot pays a few hundred subset checks)."""
    return tuple((words, slot) for name, slot in _GROUPS.items() if (words := key_terms(name)))


def same_slot(key: str, other: str) -> bool:
    """Whether the explicit rule says the two keys name one slot."""
    slot = slot_of(key)
    return slot is not None and slot == slot_of(other)


@lru_cache(maxsize=65_536)
def key_terms(key: str) -> frozenset[str]:
    """The words that tell a key's subject apart (cached: a batch compares every key of
    its scope, for the keys it offers and for each new key's candidates)."""
    return text_terms(key)


def text_terms(text: str) -> frozenset[str]:
    """key_terms of any text, uncached: a batch's turns are read once."""
    return frozenset(search_tokens(text)) - _KEY_STOP


def rule_synonym(key: str, keys: Iterable[str]) -> str | None:
    """The one of `keys` the explicit rule says `key` is another name of (the first in
    order when several are)."""
    return min((other for other in keys if other != key and same_slot(key, other)), default=None)


def same_words(key: str, keys: Iterable[str]) -> str | None:
    """The one of `keys` that holds the same words as `key`, in any order, once words
    that only say the value is new are set aside: "diet update" is "diet", "project side
    project" "side project". Never two keys the explicit rule puts in different slots."""
    mine = _own_words(key)
    if not mine:
        return None
    slot = slot_of(key)
    same = (
        other
        for other in keys
        if other != key
        and _own_words(other) == mine
        and (slot is None or slot_of(other) is None or slot_of(other) == slot)
    )
    return min(same, default=None)


@lru_cache(maxsize=65_536)
def _own_words(key: str) -> frozenset[str]:
    return frozenset(search_tokens(key)) - _NOW_WORDS


def close_keys(key: str, keys: Iterable[str], limit: int = 3) -> list[str]:
    """Up to `limit` of `keys` that may name the subject of `key`: the rule's slot first,
    then by the share of content words they have in common."""
    mine = key_terms(key)
    scored: list[tuple[float, str]] = []
    for other in keys:
        if other == key:
            continue
        if same_slot(key, other):
            scored.append((2.0, other))
            continue
        theirs = key_terms(other)
        shared = len(mine & theirs)
        if shared:
            scored.append((shared / len(mine | theirs), other))
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [other for _score, other in scored[:limit]]
