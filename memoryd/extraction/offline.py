"""Rule-based extractor used when no LLM is configured: explicit statements and links only.

It understands "remember that …", "I prefer …", "call me …", "I live in …", "I'm allergic
to …", their Chinese counterparts, and URLs; events told as "yesterday I …" / "我昨天…",
dated by their turn; and for the user profile: how to address the user, timezone,
language and occupation. Everything it produces is marked `extractor: offline`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date, timedelta
from typing import Any

from memoryd.memories.fact_rules import PERSON, REQUESTS, RULES, Rule, rx
from memoryd.memories.proposals import Fact
from memoryd.models.profiles import ProfileUpdate
from memoryd.models.tables import Category

EXTRACTOR_NAME = "offline"
_REQUESTS = {rule.pattern for rule in REQUESTS}
# v2: dated episodes; v3: named slots hold one value; v4: "we relocated to", "started at";
# v5: team lead, partner, diet, "I'm at X now"; v6: allergies, and a request to remember
# what another rule reads is that reading alone
PROMPT_VERSION = "offline.v6"


def _matches(content: str) -> list[tuple[Rule, dict[str, str]]]:
    """Each rule's reading of one turn, with its groups; a value a slot-naming rule already
    read is not read again by a later, looser one ("my lead is Raj": team lead, not "lead"),
    and a request to remember what another rule reads is that rule's fact alone."""
    named: set[str] = set()
    found: list[tuple[Rule, dict[str, str], re.Match[str]]] = []
    for rule in RULES:
        for match in rule.pattern.finditer(content):
            groups = {k: v.strip() for k, v in match.groupdict().items() if v}
            value = groups.get("x", "").casefold()
            if not value or value in named:
                continue
            if rule.name:
                named.add(value)
            found.append((rule, groups, match))
    return [(rule, groups) for rule, groups, match in found if not _restated(match, found)]


# What a request to remember may hold besides another rule's reading and still say
# nothing more: "remember that I am vegetarian" is the diet.
_FILLER = rx(r"\b(?:I|I'm|am|that|and|also|now|so)\b|[\W_]+")


def _restated(request: re.Match[str], found: list[tuple[Rule, Any, re.Match[str]]]) -> bool:
    """Whether `request`, a "remember that …" reading, says only what one of the other
    readings in `found` says: one sentence, one memory (the more precise reading, which
    keeps its slot)."""
    if request.re not in _REQUESTS:
        return False
    start, end = request.span("x")
    for _rule, _groups, match in found:
        if match.re in _REQUESTS or not start <= match.start() <= match.end() <= end:
            continue
        rest = request.string[start : match.start()] + request.string[match.end() : end]
        if not _FILLER.sub("", rest):
            return True
    return False


def extract_facts(
    turns: Sequence[tuple[str, str]], existing: dict[int, tuple[str, str]]
) -> list[Fact]:
    """Facts in the user's turns. `turns` are (role, content); `existing` maps alias -> (name,
    content) of memories already kept, so a fact in the same named slot replaces its value."""
    facts: list[Fact] = []
    seen: set[str] = set()
    by_name = {name.casefold(): alias for alias, (name, _c) in existing.items() if name}
    for role, content in turns:
        if role != "user":
            continue
        for rule, groups in _matches(content):
            text = rule.template.format(**groups)
            text = text[:1].upper() + text[1:]
            if text.casefold() in seen:
                continue
            seen.add(text.casefold())
            # A named slot holds one value: a new one retires the old, shown or not.
            name = rule.name.format(**groups) if rule.name else ""
            replaces = by_name.get(name.casefold()) if rule.name else None
            if replaces is not None and existing[replaces][1].casefold() == text.casefold():
                replaces = None  # same value again: dedup will confirm it
            facts.append(
                Fact(
                    content=text,
                    category=rule.category,
                    name=name,
                    single=bool(rule.name),
                    tags=[],
                    confidence=rule.confidence,
                    replaces=replaces,
                )
            )
    return facts


# ------------------------------------------------------------------------------- episodes
# "Yesterday I ran a half marathon": an event, dated by the day of the turn that tells it.

_EPISODE_DAYS = {
    "today": 0,
    "this morning": 0,
    "this afternoon": 0,
    "this evening": 0,
    "tonight": 0,
    "yesterday": -1,
    "last night": -1,
    "今天": 0,
    "今早": 0,
    "今晚": 0,
    "昨天": -1,
    "昨晚": -1,
}
_WHEN_EN = "|".join(w for w in _EPISODE_DAYS if w.isascii())
_WHEN_ZH = "|".join(w for w in _EPISODE_DAYS if not w.isascii())
_EPISODES = [
    rx(rf"(?:^|[.!?]\s+)(?P<when>{_WHEN_EN}),?\s+I\s+(?P<x>[^.!?\n]{{3,200}})"),
    rx(rf"我(?P<when>{_WHEN_ZH})(?P<x>[^，。！？,.!?\n]{{2,60}})"),
    rx(rf"(?P<when>{_WHEN_ZH})我(?P<x>[^，。！？,.!?\n]{{2,60}})"),
]


def extract_episodes(turns: Sequence[tuple[str, str, date]]) -> list[Fact]:
    """Dated events in the user's turns. `turns` are (role, content, the day the turn was
    said in the user's timezone); the event's day is that, or the day before."""
    facts: list[Fact] = []
    for role, content, said_on in turns:
        if role != "user":
            continue
        for pattern in _EPISODES:
            for match in pattern.finditer(content):
                what = match.group("x").strip()
                day = said_on + timedelta(days=_EPISODE_DAYS[match.group("when").lower()])
                if what.isascii():
                    text = f"{what[:1].upper()}{what[1:]} on {day}"
                else:
                    text = f"{day}{what}"
                facts.append(
                    Fact(
                        content=text,
                        category=Category.EPISODE,
                        confidence=0.85,
                        occurred_at=day,
                    )
                )
    return facts


# ------------------------------------------------------------------------- profile fields
# The easy fields of the user profile: how to address the user (as a rule for the agent:
# seed 001's document has no name field), timezone, language and occupation.

CALL_PREFIX = "Call the user "
_NAME = [
    rx(r"\b(?:call me|my name is)\s+(?P<x>[\w\- ]{1,40}?)(?=[.!?,]|$)"),
    rx(r"\bI(?: am going|'m going| go) by " + PERSON),
    rx(r"(?:叫我|我叫)(?P<x>[^，。！？,.!?\s]{1,20}?)(?=就行|就好|吧|[，。！？,.!?\s]|$)"),
]
_TIMEZONE = [
    rx(r"\bmy time\s?zone is\s+(?P<x>[A-Za-z_/]+(?:[+-]\d{1,2}(?::\d\d)?)?)"),
    rx(r"\b(?:I am|I'm) in (?P<x>(?:UTC|GMT)[+-]\d{1,2}(?::\d\d)?)"),
    rx(r"我的时区是(?P<x>[A-Za-z_/+\-:0-9]+)"),
]
_LANGUAGE = [
    rx(r"\bmy (?:native|first|primary|mother) (?:language|tongue) is\s+(?P<x>[A-Za-z]+)"),
    rx(r"我的母语是(?P<x>[^，。！？,.!?\s]{1,10})"),
]
# Profiles hold language tags (BCP 47); the names the rules above catch, as tags.
LANGUAGE_TAGS = {
    "english": "en", "chinese": "zh", "mandarin": "zh", "中文": "zh", "汉语": "zh",
    "普通话": "zh", "cantonese": "yue", "粤语": "yue", "portuguese": "pt", "spanish": "es",
    "french": "fr", "german": "de", "italian": "it", "japanese": "ja", "日语": "ja",
    "korean": "ko", "韩语": "ko", "russian": "ru", "arabic": "ar", "hindi": "hi",
}  # fmt: skip
_OCCUPATION = [
    rx(r"\bI work as an? (?P<x>[a-z][a-z \-]{2,40}?)(?=[.!?,]| at | in | for |$)"),
    rx(r"\bI(?:'m| am) an? (?P<x>[a-z][a-z \-]{2,40}?) by profession"),
    rx(r"我的职业是(?P<x>[^，。！？,.!?\s]{2,15})"),
]


def extract_profile_updates(
    turns: Sequence[tuple[str, str]], user_profile: dict[str, Any] | None
) -> list[ProfileUpdate]:
    """Profile updates in the user's turns. A new "call me" replaces the old rule."""
    rules = list((user_profile or {}).get("custom_rules") or [])
    updates: list[ProfileUpdate] = []

    def first(patterns: list[re.Pattern[str]], content: str) -> str | None:
        for pattern in patterns:
            if match := pattern.search(content):
                return match.group("x").strip()
        return None

    for role, content in turns:
        if role != "user":
            continue
        if name := first(_NAME, content):
            rule = f"{CALL_PREFIX}{name}."
            for old in [r for r in rules if r.startswith(CALL_PREFIX) and r != rule]:
                updates.append(_update("user", "remove", "custom_rules", old, 0.95, changed=True))
                rules.remove(old)
            if rule not in rules:
                updates.append(_update("user", "add", "custom_rules", rule, 0.95))
                rules.append(rule)
        if timezone := first(_TIMEZONE, content):
            updates.append(_update("user", "set", "timezone", timezone, 0.9))
        language = first(_LANGUAGE, content)
        if language and (tag := LANGUAGE_TAGS.get(language.lower())):
            updates.append(_update("user", "set", "primary_language", tag, 0.9))
        if occupation := first(_OCCUPATION, content):
            for kind in ("user", "work"):
                updates.append(_update(kind, "set", "occupation", occupation, 0.85))
    return updates


def _update(
    kind: str, op: str, path: str, value: str, confidence: float, changed: bool = False
) -> ProfileUpdate:
    key = value if op == "remove" else None
    return ProfileUpdate.model_validate(
        {
            "profile": kind,
            "op": op,
            "path": path,
            "key": key,
            "value": value,
            "confidence": confidence,
            "changed": changed,
        }
    )
