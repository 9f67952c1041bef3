"""Where session summaries come from: the LLM, or a plain extractive fallback offline."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Protocol

from pydantic import AfterValidator, BaseModel

from memoryd.llm.client import LLMClient
from memoryd.models.checks import scrubbed
from memoryd.prompts import load_prompt
from memoryd.settings import Settings

SEGMENT_PROMPT = "summarize_segment.v1"
SYNOPSIS_PROMPT = "summarize_synopsis.v1"
OFFLINE_VERSION = "offline-summary.v1"
OFFLINE_CHARS_PER_TURN = 160
OFFLINE_SYNOPSIS_CHARS = 4000


# A model's summary, kept without the control characters and lone surrogates no
# database stores (checks.scrubbed): refusing it would fail the same run every time.
def _summary_text(value: str) -> str:
    value = scrubbed(value)
    if not value.strip():
        raise ValueError("the summary is empty")
    return value


SummaryText = Annotated[str, AfterValidator(_summary_text)]


class SegmentSummary(BaseModel):
    summary: SummaryText


class SessionSynopsis(BaseModel):
    synopsis: SummaryText


@dataclass
class Summary:
    text: str
    version: str
    model: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    calls: int = 0


class Summarizer(Protocol):
    uses_llm: bool

    def segment(self, turns: Sequence[tuple[str, str]]) -> Summary: ...

    def synopsis(self, previous: str, segments: Sequence[str]) -> Summary: ...


def _data_lines(items: Sequence[dict[str, str]]) -> str:
    return "\n".join(json.dumps(i, ensure_ascii=False).replace("<", "\\u003c") for i in items)


class LLMSummarizer:
    uses_llm = True

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.client = LLMClient(settings)

    def segment(self, turns: Sequence[tuple[str, str]]) -> Summary:
        prompt = load_prompt(SEGMENT_PROMPT)
        lines = _data_lines([{"role": r, "content": c} for r, c in turns])
        result = self.client.complete_json(
            self.settings.llm.summary_model, prompt.render(turns=lines), SegmentSummary
        )
        return Summary(
            result.value.summary,
            prompt.version,
            result.model,
            result.tokens_in,
            result.tokens_out,
            result.calls,
        )

    def synopsis(self, previous: str, segments: Sequence[str]) -> Summary:
        prompt = load_prompt(SYNOPSIS_PROMPT)
        messages = prompt.render(
            synopsis=previous.replace("<", "\\u003c") or "(empty)",
            segments=_data_lines([{"summary": s} for s in segments]),
        )
        result = self.client.complete_json(
            self.settings.llm.summary_model, messages, SessionSynopsis
        )
        return Summary(
            result.value.synopsis,
            prompt.version,
            result.model,
            result.tokens_in,
            result.tokens_out,
            result.calls,
        )


class OfflineSummarizer:
    """No LLM: keep the start of each user turn. Crude, but honest and labelled."""

    uses_llm = False

    def segment(self, turns: Sequence[tuple[str, str]]) -> Summary:
        said = [c.strip()[:OFFLINE_CHARS_PER_TURN] for r, c in turns if r == "user"]
        return Summary(
            "User said: " + " | ".join(said) if said else "(no user turns)", OFFLINE_VERSION
        )

    def synopsis(self, previous: str, segments: Sequence[str]) -> Summary:
        parts = [p for p in (previous, *segments) if p]
        return Summary("\n".join(parts)[-OFFLINE_SYNOPSIS_CHARS:], OFFLINE_VERSION)


@lru_cache(maxsize=4)
def get_summarizer(settings: Settings) -> Summarizer:
    return LLMSummarizer(settings) if settings.llm.llm_configured else OfflineSummarizer()
