"""What one extraction call is given: the claimed turns, the scope's documents, the
memories most related to the turns and the subject keys the scope uses.

The claim is its own transaction; what the prompt shows is read after it, by recall's
ranked search over the whole scope (recall/candidates.py), so a memory written years
and thousands of memories ago is shown when the turns are about it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import update

from memoryd.extraction.prompt import (
    cut_to_budget,
    fit_memories,
    render_keys,
    render_profiles,
    turn_budget,
    turn_cost,
)
from memoryd.extraction.views import Extractor, MemoryView, TurnView
from memoryd.ingest.leases import Claim, claim_batch
from memoryd.llm import circuit
from memoryd.memories.profiles import get_profile
from memoryd.memories.subjects import key_for
from memoryd.memories.synonyms import key_terms, text_terms
from memoryd.models import key_index
from memoryd.models.coordination import database_time
from memoryd.models.db import session_scope
from memoryd.models.keys import SessionKey
from memoryd.models.profiles import ProfileType
from memoryd.models.tables import ExtractionBatch
from memoryd.recall.candidates import query_vector, related
from memoryd.settings import Settings
from memoryd.text import estimate_tokens

log = logging.getLogger(__name__)

PROMPT_KEYS = 200  # subject keys listed in a prompt at most, within its token share


@dataclass
class Prepared:
    """What one LLM call needs, and what the write needs of what it was shown."""

    claim: Claim
    turns: list[TurnView]
    profiles: dict[str, dict[str, Any]]  # the scope's documents as they are now
    memories: list[MemoryView] = field(default_factory=list)
    aliases: dict[int, int] = field(default_factory=dict)  # prompt alias -> memory id
    keys: list[str] = field(default_factory=list)  # offered to the model
    scope_keys: set[str] = field(default_factory=set)  # every key the scope holds
    key_aliases: dict[str, str] = field(default_factory=dict)  # learnt: alias -> key
    new_aliases: dict[str, str] = field(default_factory=dict)  # learnt by this batch
    # For each proposed fact (by content hash), memories a near duplicate may be among.
    nearby: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class Refusal:
    """Why no batch was claimed: nothing due, or the LLM circuit stopped it."""

    circuit_open: bool = False


def claim(settings: Settings, key: SessionKey, extractor: Extractor) -> Prepared | Refusal:
    """Claim the next batch of the session and read its turns and documents, in one
    transaction."""
    with session_scope(settings.storage) as session:
        now = database_time(session)
        state = circuit.read(session) if extractor.uses_llm else None
        if state is not None and state.is_open(now, settings.extraction):
            return Refusal(circuit_open=True)
        budget = turn_budget(settings)
        claimed = claim_batch(
            session, settings.extraction, key, now, token_budget=budget, cost=turn_cost
        )
        if claimed is None:
            return Refusal()
        if state is not None and state.is_half_open(now, settings.extraction):
            if not circuit.take_probe(session, settings.extraction, state, now):
                session.rollback()  # another worker is probing the endpoint
                return Refusal(circuit_open=True)
            log.warning("LLM circuit half-open: batch %s probes the endpoint", claimed.batch_id)
        turns = [TurnView(t.role, t.content, t.created_at) for t in claimed.turns]
        if claimed.oversized:
            turns = [cut_to_budget(turns[0], budget)]
            session.execute(
                update(ExtractionBatch)
                .where(ExtractionBatch.id == claimed.batch_id)
                .values(truncated_turns=1)
            )
            log.warning(
                "turn %s is over the prompt budget: extracting its head", claimed.turns[0].id
            )
        documents = {
            kind.value: get_profile(session, key.scope, kind, now).content for kind in ProfileType
        }
    return Prepared(claimed, turns, documents)


def show(settings: Settings, prepared: Prepared) -> None:
    """Choose what the prompt shows of the scope: its keys, and its memories most related
    to the user's turns, within extract_memory_tokens with the profiles."""
    scope = prepared.claim.key.scope
    said = [t.content for t in prepared.turns if t.role == "user"] or [
        t.content for t in prepared.turns
    ]
    text = "\n".join(said)
    vector = query_vector(settings, text)  # before the transaction: it may be a call
    with session_scope(settings.storage, readonly=True) as session:
        uses = key_index.keys_in_use(session, scope)
        prepared.key_aliases = key_index.aliases(session, scope)
        hits = related(
            session,
            settings,
            scope,
            text,
            settings.extraction.prefetch_limit,
            vector=vector,
            fill=True,
        )
    prepared.scope_keys = {u.key for u in uses}
    left = settings.extraction.extract_memory_tokens - estimate_tokens(
        render_profiles(prepared.profiles, settings.extraction)
    )
    hit_keys = [key_for(h.name, h.content) for h in hits]
    keys = offered_keys([u.key for u in uses], text, hit_keys, left // 4)
    prepared.keys = keys
    left -= estimate_tokens(render_keys(keys))
    views = [MemoryView(i, h.category, h.name, h.content) for i, h in enumerate(hits, 1)]
    prepared.memories = fit_memories(views, left)
    prepared.aliases = {v.alias: hits[v.alias - 1].id for v in prepared.memories}


def offered_keys(keys: list[str], text: str, hit_keys: list[str], budget: int) -> list[str]:
    """The keys a prompt offers, within `budget` tokens: those relevant to the turns
    first (the keys of the memories the search found for them, in its order, then keys
    whose words the turns hold), then the rest as given (most used first)."""
    held = set(keys)
    said = text_terms(text)
    relevant = [k for k in hit_keys if k in held]
    relevant += [k for k in keys if key_terms(k) & said]
    chosen: list[str] = []
    used = 0
    for key in dict.fromkeys([*relevant, *keys]):
        used += estimate_tokens(render_keys([key]))  # a key and its separator, or more
        if len(chosen) == PROMPT_KEYS or used > budget:
            break
        chosen.append(key)
    return chosen
