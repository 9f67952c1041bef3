"""What an extractor is shown (a batch's turns, the scope's memories under short integer
aliases, its profiles) and what it proposes: the interface every extractor keeps."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from memoryd.memories.proposals import Experience, Fact
from memoryd.models.profiles import ProfileUpdate


@dataclass(frozen=True)
class TurnView:
    role: str
    content: str
    at: datetime  # when it was said (the turn's timestamp, UTC)


@dataclass(frozen=True)
class MemoryView:
    alias: int
    category: str
    name: str
    content: str


@dataclass
class Proposal:
    facts: list[Fact]
    extractor: str  # "llm" or "offline"
    model: str | None
    prompt_version: str
    tokens_in: int = 0
    tokens_out: int = 0
    llm_calls: int = 0
    duration_ms: float = 0.0
    experiences: list[Experience] = field(default_factory=list)
    profile_updates: list[ProfileUpdate] = field(default_factory=list)
    # Items of the answer left out as malformed (ExtractionOutput.dropped), by reason.
    dropped: Counter[str] = field(default_factory=Counter)
    # What the pipeline mended in the answer (extraction/amend.py), by kind.
    amended: Counter[str] = field(default_factory=Counter)


Profiles = Mapping[str, dict[str, Any]]  # the scope's current documents, by type


class Extractor(Protocol):
    uses_llm: bool  # its calls count for (and are stopped by) the LLM circuit

    def extract(
        self,
        turns: Sequence[TurnView],
        memories: Sequence[MemoryView],
        profiles: Profiles | None = None,
        keys: Sequence[str] = (),
    ) -> Proposal: ...
