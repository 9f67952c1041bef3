"""Confidence gating: which proposed facts are worth keeping, and why the others were not."""

from __future__ import annotations

import logging
from collections import Counter

from memoryd.memories.proposals import Fact
from memoryd.settings import AgentDefaults, ExtractionSettings
from memoryd.text import holds_secret

log = logging.getLogger(__name__)


def gate_facts(facts: list[Fact], settings: ExtractionSettings) -> tuple[list[Fact], Counter[str]]:
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
            if fact.occurred_at_problem:  # the fact stays, its date is dropped and counted
                log.warning("dropped a proposed date: %s", fact.occurred_at_problem)
                rejected["invalid_occurred_at"] += 1
            kept.append(fact.model_copy(update={"content": content}))
    return kept, rejected


def keep_categories(
    settings: AgentDefaults, facts: list[Fact], rejected: Counter[str]
) -> list[Fact]:
    """Extraction keeps only the agent's categories; the others count as rejected."""
    if settings.memory_categories is None:
        return facts
    kept = [f for f in facts if f.category in settings.memory_categories]
    if len(kept) < len(facts):
        rejected["category"] += len(facts) - len(kept)
    return kept
