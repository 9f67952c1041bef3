"""Confidence gating: which proposed facts are worth keeping, and why the others were not."""

from __future__ import annotations

import re
from collections import Counter

from memoryd.models.schemas import Fact
from memoryd.settings import Settings

_SECRET_PATTERNS = [
    re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"),  # OpenAI-style keys
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key id
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"),  # GitHub tokens
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),  # Slack tokens
    re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),  # JWT
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(
        r"(password|passwd|passcode|pwd|api[ _-]?key|secret|token|密码|口令|密钥)"
        r"\s*(is|=|:|：|是)\s*\S+",
        re.IGNORECASE,
    ),
]
_CARD_CANDIDATE = re.compile(r"\b(?:\d[ -]?){13,19}\b")


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def holds_secret(text: str) -> bool:
    """API keys, tokens, passwords and card numbers never become memories."""
    if any(p.search(text) for p in _SECRET_PATTERNS):
        return True
    for match in _CARD_CANDIDATE.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if 13 <= len(digits) <= 19 and _luhn_ok(digits):
            return True
    return False


def gate_facts(facts: list[Fact], settings: Settings) -> tuple[list[Fact], Counter[str]]:
    """Keep the facts worth remembering; count every rejection by its reason."""
    rejected: Counter[str] = Counter()
    kept: list[Fact] = []
    for fact in facts:
        content = fact.content.strip()
        if fact.confidence < settings.min_confidence:
            rejected["low_confidence"] += 1
        elif len(content) < settings.min_fact_chars:
            rejected["too_short"] += 1
        elif len(content) > settings.max_fact_chars:
            rejected["too_long"] += 1
        elif holds_secret(content):
            rejected["secret"] += 1
        elif len(kept) >= settings.max_facts:
            rejected["over_max_facts"] += 1
        else:
            kept.append(fact.model_copy(update={"content": content}))
    return kept, rejected
