"""The extraction prompt: how a batch's turns, memories, keys and profiles are written
into it (as data the turns' text cannot break out of), dated in the user's zone, and
what fits its token budget."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from functools import cache

from memoryd.extraction.views import MemoryView, Profiles, TurnView
from memoryd.memories.proposals import Fact
from memoryd.models.profiles import ProfileType
from memoryd.prompts import load_prompt
from memoryd.recall.profile_prompt import render_profile
from memoryd.settings import ExtractionSettings, Settings
from memoryd.text import estimate_tokens
from memoryd.zones import local

EXTRACT_PROMPT = "extract.v4"  # the default of MEMORYD_EXTRACT_PROMPT


def _as_data(obj: object) -> str:
    """JSON on one line; '<' escaped so turn text can never close the <turns> delimiter."""
    return json.dumps(obj, ensure_ascii=False).replace("<", "\\u003c")


# ------------------------------------------------------------------------------ time
# Turns are shown with when they were said, in the user's timezone when their profile
# names one, so the model can turn "yesterday" into a date.

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def when(at: datetime, zone: tzinfo) -> str:
    """Fixed width (16 characters for any year from 1000), so a turn's cost is known
    before its time is."""
    return f"{local(at, zone):%Y-%m-%d %H:%M}"


def today_line(turns: Sequence[TurnView], zone: tzinfo) -> str:
    """The session's date: the newest turn's, with its weekday and the times' UTC offset
    (UTC's, for a time the zone cannot carry: see `local`)."""
    newest = local(max((t.at for t in turns), default=datetime.now(UTC)), zone)
    offset = newest.utcoffset() or timedelta()
    sign, minutes = ("-" if offset < timedelta() else "+"), abs(offset) // timedelta(minutes=1)
    label = f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}"
    return f"{WEEKDAYS[newest.weekday()]} {newest:%Y-%m-%d}; turn times are {label}"


def render_turn(index: int, turn: TurnView, zone: tzinfo = UTC) -> str:
    """`[3] 2026-11-02 14:05 user: "…"`: the content as a JSON string, so it stays on
    its line and cannot close the delimiter."""
    return f"[{index}] {when(turn.at, zone)} {turn.role}: {_as_data(turn.content)}"


def render_turns(turns: Sequence[TurnView], zone: tzinfo = UTC) -> str:
    return "\n".join(render_turn(i, t, zone) for i, t in enumerate(turns, 1))


def render_memory(m: MemoryView) -> str:
    return _as_data({"id": m.alias, "category": m.category, "name": m.name, "content": m.content})


def render_memories(memories: Sequence[MemoryView]) -> str:
    return "\n".join(render_memory(m) for m in memories) or "(none yet)"


def render_fact(number: int, fact: Fact) -> str:
    return _as_data({"fact": number, "name": fact.name, "content": fact.content})


def render_keys(keys: Sequence[str]) -> str:
    return _as_data(list(keys)) if keys else "(none yet)"


def render_profiles(profiles: Profiles, settings: ExtractionSettings) -> str:
    """The scope's documents as system prompts show them (most useful first, empty fields
    left out), within half of the memories' part of the prompt."""
    budget = settings.extract_memory_tokens // 2 // max(len(profiles), 1)
    blocks = [render_profile(ProfileType(k), doc, budget) for k, doc in profiles.items()]
    return "\n".join(b for b in blocks if b) or "(none yet)"


# ------------------------------------------------------------------------- prompt budget
# A batch's prompt is the fixed prompt, the memories shown (at most extract_memory_tokens)
# and its turns (the rest of extract_max_prompt_tokens), all by the local token estimate.

MAX_INDEX = 10_000  # wider than any turn index a prompt shows, so a cost never falls short
# Any time renders as wide as this one (`when`); Wednesday is the longest weekday name.
SAMPLE_AT = datetime(2025, 12, 31, 23, 59, tzinfo=UTC)
TRUNCATED = " […]"


def turn_cost(role: str, content: str) -> int:
    """Tokens one turn takes in the prompt, time, escaping and line break included."""
    return estimate_tokens(render_turn(MAX_INDEX, TurnView(role, content, SAMPLE_AT))) + 1


@cache
def prompt_overhead(version: str = EXTRACT_PROMPT) -> int:
    """Tokens of an extraction prompt around its turns and memories (its date line at
    its widest)."""
    today = today_line([TurnView("user", "", SAMPLE_AT)], timezone(-timedelta(hours=12)))
    messages = load_prompt(version).render(
        turns="", memories="(none yet)", keys="(none yet)", profiles="(none yet)", today=today
    )
    return sum(estimate_tokens(m["content"]) + 4 for m in messages)


def turn_budget(settings: Settings) -> int:
    overhead = prompt_overhead(settings.llm.extract_prompt)
    return (
        settings.extraction.extract_max_prompt_tokens
        - overhead
        - settings.extraction.extract_memory_tokens
    )


def fit_memories(memories: Sequence[MemoryView], budget: int) -> list[MemoryView]:
    """The first memories (they come most relevant first) whose lines fit `budget`."""
    kept: list[MemoryView] = []
    used = 0
    for memory in memories:
        used += estimate_tokens(render_memory(memory)) + 1
        if used > budget:
            break
        kept.append(memory)
    return kept


def cut_to_budget(turn: TurnView, budget: int) -> TurnView:
    """The longest head of a turn whose cost fits `budget`, marked as cut."""
    low, high = 0, len(turn.content)
    while low < high:
        mid = (low + high + 1) // 2
        if turn_cost(turn.role, turn.content[:mid] + TRUNCATED) <= budget:
            low = mid
        else:
            high = mid - 1
    return TurnView(turn.role, turn.content[:low] + TRUNCATED, turn.at)
