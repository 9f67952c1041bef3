"""Rule-based extractor used when no LLM is configured: explicit statements and links only.

It understands "remember that …", "I prefer …", "call me …", "I live in …", their Chinese
counterparts, and URLs. Everything it produces is marked `extractor: offline`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memoryd.models.schemas import Fact
from memoryd.models.tables import Category

EXTRACTOR_NAME = "offline"
PROMPT_VERSION = "offline.v1"


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    template: str  # formatted with the captured group `x`
    category: Category
    name: str  # the slot: a new fact with the same name replaces the old one
    confidence: float
    temporary: str = "no"


def _r(regex: str) -> re.Pattern[str]:
    return re.compile(regex, re.IGNORECASE)


# A captured value ends at sentence punctuation, a joining word or a time phrase, so
# "I live in Berlin and I prefer tea" and "I moved to Lisbon last week" stay clean.
_END = (
    r"(?P<x>[^.!?。！？\n]{2,200}?)"
    r"(?=\s+(?:and|but|because|so|last|this|next|since|yesterday|today|tomorrow)\b"
    r"|[.!?。！？;\n]|$)"
)

RULES: list[Rule] = [
    Rule(_r(r"\b(?:please )?remember(?: that|:)?\s+" + _END), "{x}", Category.USER, "", 0.95),
    Rule(_r(r"(?:请)?记住[:：,，]?\s*" + _END), "{x}", Category.USER, "", 0.95),
    Rule(
        _r(r"\bcall me\s+(?P<x>[\w\- ]{1,40}?)(?=[.!?,]|$)"),
        "Wants to be called {x}",
        Category.USER,
        "preferred name",
        0.95,
    ),
    Rule(
        _r(r"\bmy name is\s+(?P<x>[\w\- ]{1,40}?)(?=[.!?,]|$)"),
        "Name is {x}",
        Category.USER,
        "name",
        0.9,
    ),
    Rule(
        _r(r"叫我(?P<x>[^，。！？,.!?\s]{1,20}?)(?=就行|就好|吧|[，。！？,.!?\s]|$)"),
        "希望被称为{x}",
        Category.USER,
        "preferred name",
        0.95,
    ),
    Rule(
        _r(r"\bI (?:live|moved) (?:in|to)\s+" + _END),
        "Lives in {x}",
        Category.USER,
        "home city",
        0.9,
    ),
    Rule(
        _r(r"我(?:住在|搬到了?)(?P<x>[^，。！？,.!?\s]{1,30})"),
        "住在{x}",
        Category.USER,
        "home city",
        0.9,
    ),
    Rule(
        _r(r"\bI (?:really )?(?:prefer|like|love)\s+" + _END), "Prefers {x}", Category.USER, "", 0.9
    ),
    Rule(
        _r(r"\bI (?:don't|do not|never) (?:like|want)\s+" + _END),
        "Dislikes {x}",
        Category.USER,
        "",
        0.9,
    ),
    Rule(
        _r(r"我(?:更|很|最)?(?:喜欢|偏好|爱)(?P<x>[^，。！？,.!?\n]{1,60})"),
        "喜欢{x}",
        Category.USER,
        "",
        0.9,
    ),
    Rule(_r(r"我不喜欢(?P<x>[^，。！？,.!?\n]{1,60})"), "不喜欢{x}", Category.USER, "", 0.9),
    Rule(
        _r(r"(?:^|[.!?]\s+)(?:please\s+)?(?:don't|do not|never)\s+(?P<x>[^.!?\n]{3,200})"),
        "Do not {x}",
        Category.FEEDBACK,
        "",
        0.85,
    ),
    Rule(_r(r"(?:请)?不要(?P<x>[^，。！？,.!?\n]{2,60})"), "不要{x}", Category.FEEDBACK, "", 0.85),
    Rule(
        _r(r"\bmy favou?rite (?P<slot>[\w ]{2,30}?) is\s+" + _END),
        "Favourite {slot} is {x}",
        Category.USER,
        "favourite {slot}",
        0.9,
    ),
    # Any other "my X is Y": less certain, so it lands in the short tier.
    Rule(
        _r(r"\bmy (?!name\b|favou?rite\b)(?P<slot>[\w' ]{2,30}?) is\s+" + _END),
        "My {slot} is {x}",
        Category.USER,
        "{slot}",
        0.75,
    ),
    Rule(_r(r"(?P<x>https?://[^\s<>\"'）)]+)"), "Shared link: {x}", Category.REFERENCE, "", 0.7),
]


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
        for rule in RULES:
            for match in rule.pattern.finditer(content):
                groups = {k: v.strip() for k, v in match.groupdict().items() if v}
                if "x" not in groups:
                    continue
                text = rule.template.format(**groups)
                text = text[:1].upper() + text[1:]
                if text.casefold() in seen:
                    continue
                seen.add(text.casefold())
                name = rule.name.format(**groups) if rule.name else text[:60]
                replaces = by_name.get(name.casefold()) if rule.name else None
                if replaces is not None and existing[replaces][1].casefold() == text.casefold():
                    replaces = None  # same value again: dedup will confirm it
                facts.append(
                    Fact(
                        content=text,
                        category=rule.category,
                        name=name,
                        tags=[],
                        confidence=rule.confidence,
                        replaces=replaces,
                    )
                )
    return facts
