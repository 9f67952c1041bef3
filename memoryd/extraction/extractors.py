"""Where facts come from: the LLM extractor, or the offline rules when no LLM is configured.

Both take the batch's turns plus the scope's relevant memories under short integer
aliases (1, 2, 3 …) so the model can only point at memories it was shown (views.py);
the prompt is written by prompt.py.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence

from memoryd.extraction import offline
from memoryd.extraction.amend import amend
from memoryd.extraction.answers import ExtractionOutput
from memoryd.extraction.prompt import (
    render_keys,
    render_memories,
    render_profiles,
    render_turns,
    today_line,
)
from memoryd.extraction.views import Extractor, MemoryView, Profiles, Proposal, TurnView
from memoryd.llm.client import LLMClient, client_key
from memoryd.llm.shared import Shared
from memoryd.prompts import load_prompt
from memoryd.settings import Settings
from memoryd.zones import local, user_zone


class LLMExtractor:
    uses_llm = True

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.client = LLMClient(settings)
        self.prompt = load_prompt(settings.llm.extract_prompt)

    def extract(
        self,
        turns: Sequence[TurnView],
        memories: Sequence[MemoryView],
        profiles: Profiles | None = None,
        keys: Sequence[str] = (),
    ) -> Proposal:
        started = time.perf_counter()
        zone = user_zone(profiles)
        messages = self.prompt.render(
            today=today_line(turns, zone),
            turns=render_turns(turns, zone),
            memories=render_memories(memories),
            keys=render_keys(keys),
            profiles=render_profiles(profiles or {}, self.settings.extraction),
        )
        result = self.client.complete_json(
            self.settings.llm.extraction_model, messages, ExtractionOutput
        )
        strict = self.settings.llm.small_model_checks
        mended = amend(result.value.facts, turns, memories, keys, zone, strict, self.prompt.system)
        return Proposal(
            facts=mended.facts,
            experiences=result.value.experiences,
            profile_updates=result.value.profile_updates,
            dropped=result.value.dropped + mended.dropped,
            amended=mended.changes,
            extractor="llm",
            model=result.model,
            prompt_version=self.prompt.version,
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
            llm_calls=result.calls,
            duration_ms=(time.perf_counter() - started) * 1000,
        )


class OfflineExtractor:
    uses_llm = False

    def extract(
        self,
        turns: Sequence[TurnView],
        memories: Sequence[MemoryView],
        profiles: Profiles | None = None,
        keys: Sequence[str] = (),
    ) -> Proposal:
        started = time.perf_counter()
        said = [(t.role, t.content) for t in turns]
        facts = offline.extract_facts(said, {m.alias: (m.name, m.content) for m in memories})
        zone = user_zone(profiles)  # "yesterday" is the user's yesterday
        facts += offline.extract_episodes(
            [(t.role, t.content, local(t.at, zone).date()) for t in turns]
        )
        user_profile = (profiles or {}).get("user")
        return Proposal(
            facts=facts,
            profile_updates=offline.extract_profile_updates(said, user_profile),
            extractor=offline.EXTRACTOR_NAME,
            model=None,
            prompt_version=offline.PROMPT_VERSION,
            duration_ms=(time.perf_counter() - started) * 1000,
        )


class NoExtraction:
    """Memory is off for the agent: batches still run (turns are marked done, the batch is
    recorded as extractor "disabled"), but nothing is proposed and no LLM is called."""

    uses_llm = False

    def extract(
        self,
        turns: Sequence[TurnView],
        memories: Sequence[MemoryView],
        profiles: Profiles | None = None,
        keys: Sequence[str] = (),
    ) -> Proposal:
        return Proposal(facts=[], extractor="disabled", model=None, prompt_version="none")


_llm_extractors: Shared[LLMExtractor] = Shared(size=8)


def get_extractor(settings: Settings) -> Extractor:
    """One LLM client per model and endpoint per process, so HTTP connections are reused
    by every agent: agents' overrides make Settings copies that differ in other fields."""
    if not settings.llm.llm_configured:
        return OfflineExtractor()
    key = (settings.llm.extraction_model, settings.llm.extract_prompt, *client_key(settings))
    shared = _llm_extractors.get(key, lambda: LLMExtractor(settings))
    if shared.settings is settings:
        return shared
    extractor = copy.copy(shared)  # the client and prompt shared, the agent's own settings
    extractor.settings = settings
    return extractor
