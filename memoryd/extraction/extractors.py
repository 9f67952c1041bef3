"""Where facts come from: the LLM extractor, or the offline rules when no LLM is configured.

Both take the batch's turns plus the scope's relevant memories under short integer
aliases (1, 2, 3 …) so the model can only point at memories it was shown.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from memoryd.extraction import offline
from memoryd.llm.client import LLMClient
from memoryd.models.schemas import ExtractionOutput, Fact
from memoryd.prompts import load_prompt
from memoryd.settings import Settings

EXTRACT_PROMPT = "extract.v1"


@dataclass(frozen=True)
class TurnView:
    role: str
    content: str


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


class Extractor(Protocol):
    def extract(self, turns: Sequence[TurnView], memories: Sequence[MemoryView]) -> Proposal: ...


def _as_data(obj: dict[str, object]) -> str:
    """One JSON line; '<' escaped so turn text can never close the <turns> delimiter."""
    return json.dumps(obj, ensure_ascii=False).replace("<", "\\u003c")


def render_turns(turns: Sequence[TurnView]) -> str:
    return "\n".join(
        _as_data({"i": i, "role": t.role, "content": t.content}) for i, t in enumerate(turns, 1)
    )


def render_memories(memories: Sequence[MemoryView]) -> str:
    return (
        "\n".join(
            _as_data({"id": m.alias, "category": m.category, "name": m.name, "content": m.content})
            for m in memories
        )
        or "(none yet)"
    )


class LLMExtractor:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.client = LLMClient(settings)
        self.prompt = load_prompt(EXTRACT_PROMPT)

    def extract(self, turns: Sequence[TurnView], memories: Sequence[MemoryView]) -> Proposal:
        started = time.perf_counter()
        messages = self.prompt.render(turns=render_turns(turns), memories=render_memories(memories))
        result = self.client.complete_json(
            self.settings.extraction_model, messages, ExtractionOutput
        )
        return Proposal(
            facts=result.value.facts,
            extractor="llm",
            model=result.model,
            prompt_version=self.prompt.version,
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
            llm_calls=result.calls,
            duration_ms=(time.perf_counter() - started) * 1000,
        )


class OfflineExtractor:
    def extract(self, turns: Sequence[TurnView], memories: Sequence[MemoryView]) -> Proposal:
        started = time.perf_counter()
        facts = offline.extract_facts(
            [(t.role, t.content) for t in turns],
            {m.alias: (m.name, m.content) for m in memories},
        )
        return Proposal(
            facts=facts,
            extractor=offline.EXTRACTOR_NAME,
            model=None,
            prompt_version=offline.PROMPT_VERSION,
            duration_ms=(time.perf_counter() - started) * 1000,
        )


@lru_cache(maxsize=4)
def get_extractor(settings: Settings) -> Extractor:
    """One extractor per settings per process, so HTTP connections are reused."""
    return LLMExtractor(settings) if settings.llm_configured else OfflineExtractor()
