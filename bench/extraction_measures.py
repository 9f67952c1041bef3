"""What bench/extraction.py measures in a scope after its scenario ran: the labels of
bench/data/extraction_scenarios.json checked against the memories stored and recalled."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.extraction.dates import relative_phrases
from memoryd.models.tables import Memory, MemoryStatus

Words = list[str]


def holds(content: str, words: Words) -> bool:
    """Whether the content holds every word; a date counts written either way the
    pipeline writes one ("2026年3月4日" is "2026-03-04")."""
    lower = _CHINESE_DATE.sub(_iso, content).casefold()
    return all(w.casefold() in lower for w in words)


_CHINESE_DATE = re.compile(r"(\d{4})年(\d{1,2})月(\d{1,2})日")


def _iso(match: re.Match[str]) -> str:
    year, month, day = (int(g) for g in match.groups())
    return f"{year:04d}-{month:02d}-{day:02d}"


@dataclass
class Tally:
    """Sums over the scenarios of one run."""

    scenarios: int = 0
    gold: int = 0
    gold_found: int = 0
    wrong_kept: int = 0
    other_person: int = 0
    contradictions: int = 0
    resolved: int = 0
    memories: int = 0
    relative_left: int = 0
    keyed: int = 0
    later: int = 0
    reused: int = 0
    cross_key: int = 0  # old memories retired by a memory of another key
    at1: int = 0
    at3: int = 0
    calls: int = 0
    valid: int = 0
    turns: int = 0
    tokens: int = 0
    batches: int = 0
    seconds: float = 0.0
    misses: list[str] = field(default_factory=list)

    def figures(self) -> dict[str, float]:
        def share(part: float, whole: float) -> float:
            return part / whole if whole else 0.0

        return {
            "valid_answers": share(self.valid, self.calls),
            "gold_recall": share(self.gold_found, self.gold),
            "wrong_facts_kept": float(self.wrong_kept),
            "other_person_as_user": float(self.other_person),
            "contradictions_resolved": share(self.resolved, self.contradictions),
            "relative_dates_left": share(self.relative_left, self.memories),
            "facts_with_key": share(self.keyed, self.memories),
            "keys_reused": share(self.reused, self.later),
            "cross_key_replacements": float(self.cross_key),
            "recall_at_1": share(self.at1, self.scenarios),
            "recall_at_3": share(self.at3, self.scenarios),
            "llm_calls_per_turn": share(self.calls, self.turns),
            "tokens_per_turn": share(self.tokens, self.turns),
            "seconds_per_batch": share(self.seconds, self.batches),
        }


def check_scope(
    session: Session,
    client: MemoryClient,
    agent: str,
    scenario: dict[str, Any],
    first: tuple[set[str], int],
    tally: Tally,
) -> None:
    """Add one scenario's figures to `tally`. `first`: the scope's keys after its first
    session (what a later session could reuse) and its newest memory id then."""
    first_keys, first_max_id = first
    user = scenario["id"]
    rows = session.scalars(
        select(Memory).where(Memory.agent_id == agent, Memory.user_id == user)
    ).all()
    active = [m.content for m in rows if m.status == MemoryStatus.ACTIVE]
    tally.scenarios += 1
    tally.gold += len(scenario["gold"])
    found = [g for g in scenario["gold"] if any(holds(c, g) for c in active)]
    tally.gold_found += len(found)
    tally.misses += [f"{user}: not remembered {g}" for g in scenario["gold"] if g not in found]
    wrong = [c for c in active for w in scenario["forbidden"] if holds(c, w)]
    wrong += [c for c in active if _keeps_old(c, scenario)]
    tally.wrong_kept += len(wrong)
    tally.misses += [f"{user}: kept {c!r}" for c in wrong]
    for other in scenario["others"]:
        for c in active:
            named = any(p.casefold() in c.casefold() for p in other["person"])
            if holds(c, other["value"]) and not named:
                tally.other_person += 1
                tally.misses.append(f"{user}: another's fact as the user's: {c!r}")
    if scenario["retired"]:
        tally.contradictions += 1
        answered = any(holds(c, scenario["answer"]) for c in active)
        resolved = answered and not any(_keeps_old(c, scenario) for c in active)
        tally.resolved += resolved
        if not answered:
            tally.misses.append(f"{user}: the new value {scenario['answer']} is not active")
    tally.memories += len(rows)
    tally.relative_left += sum(relative_phrases(m.content) > 0 for m in rows)
    tally.keyed += sum(bool(m.name_key) for m in rows)
    later = [m for m in rows if m.name_key and m.id > first_max_id]
    tally.later += len(later)
    tally.reused += sum(m.name_key in first_keys for m in later)
    by_id = {m.id: m for m in rows}
    tally.cross_key += sum(
        1
        for m in rows
        if m.superseded_by_id in by_id and by_id[m.superseded_by_id].name_key != m.name_key
    )
    hits = client.recall(scenario["question"], agent, user, k=3)
    at1 = bool(hits) and holds(hits[0].content, scenario["answer"])
    tally.at1 += at1
    if not at1:
        top = hits[0].content if hits else None
        tally.misses.append(f"{user}: {scenario['question']!r} recalled first {top!r}")
    tally.at3 += any(holds(h.content, scenario["answer"]) for h in hits)


def _keeps_old(content: str, scenario: dict[str, Any]) -> bool:
    """Whether a memory still holds a value the scenario retires as the current one. A
    memory telling the change names both ("Moved from Berlin to Lisbon", "英文名改成Leo了，
    叫Kevin的人太多了"): that is the new fact, not the old one kept."""
    if holds(content, scenario["answer"]):
        return False
    return any(holds(content, old) for old in scenario["retired"])
