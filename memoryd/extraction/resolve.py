"""After the extraction call, before the write: what each proposed fact is to be
reconciled with beyond what its prompt showed.

- Every fact gets its `nearby` memories (recall's search on its text), where the write
  looks for a near duplicate.
- A fact whose key holds one value (`single`) needs nothing more: the write retires the
  key's other memories itself (memories/reconcile.py).
- A fact of a key that holds several values, whose other memories the model was not
  shown, cannot be settled by rule ("likes ramen" adds to "likes sushi"; "no longer
  eats meat" retires "eats everything"). One small follow-up call for the whole batch
  shows the model those memories and takes its `replaces` / `same_as`, as if they had
  been in the first prompt. Without an LLM (the offline rules) such facts simply add.
- A fact named by a key the scope does not hold may name one it does in other words
  (memories/synonyms.py). An alias learnt earlier, or the synonym rule, lands it on the
  scope's key at once. Otherwise the memories of the scope's close keys join the same
  follow-up call; where the model says the fact replaces or repeats one of them, the
  fact takes that memory's key, and the batch records the alias for later facts.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from memoryd.extraction.answers import ResolveOutput
from memoryd.extraction.dates import names_a_day
from memoryd.extraction.extractors import LLMExtractor
from memoryd.extraction.other_keys import (
    candidate_keys,
    land_on_known_keys,
    new_key_vectors,
    take_key,
)
from memoryd.extraction.prepare import Prepared
from memoryd.extraction.prompt import fit_memories, render_fact, render_memories
from memoryd.extraction.views import Extractor, MemoryView, Proposal
from memoryd.memories.proposals import Fact
from memoryd.memories.subjects import key_for, same_key_memories
from memoryd.models.db import session_scope
from memoryd.models.keys import Scope
from memoryd.models.tables import Memory
from memoryd.prompts import load_prompt
from memoryd.recall.candidates import nearby
from memoryd.recall.embedders import Vectors
from memoryd.settings import Settings
from memoryd.text import content_hash

RESOLVE_PROMPT = "resolve.v1"
CROSS_KEY_MEMORIES = 5  # memories of each close key the follow-up shows
# The follow-up's ids start here: a prompt never shows this many memories, so no id of
# the first call's answer can name a memory only the follow-up was shown.
FOLLOW_UP_ALIASES = 100_000

Unsettled = list[tuple[Fact, list[MemoryView]]]


def resolve(
    settings: Settings, prepared: Prepared, proposal: Proposal, extractor: Extractor
) -> None:
    """Fill `prepared.nearby`, settle the unshown memories of list-like keys, and land
    facts of keys new to the scope on the scope's key they name another way."""
    _drop_unshown(prepared, proposal.facts)
    land_on_known_keys(prepared, proposal)
    facts = [*proposal.facts, *(e.as_fact() for e in proposal.experiences)]
    scope = prepared.claim.key.scope
    asks = isinstance(extractor, LLMExtractor)
    vectors = new_key_vectors(settings, prepared, proposal.facts) if asks else {}
    with session_scope(settings.storage, readonly=True) as session:
        prepared.nearby = nearby(session, settings, scope, facts)
        unsettled = _unsettled(session, settings, prepared, proposal.facts, vectors) if asks else []
    if unsettled and isinstance(extractor, LLMExtractor):
        _ask(settings, extractor, prepared, proposal, unsettled)


def _drop_unshown(prepared: Prepared, facts: list[Fact]) -> None:
    """A `replaces` or `same_as` naming an id the prompt did not show points at nothing:
    the model made it up, and the ids the follow-up adds are not for it."""
    for fact in facts:
        if fact.replaces not in prepared.aliases:
            fact.replaces = None
        if fact.same_as not in prepared.aliases:
            fact.same_as = None


def _unsettled(
    session: Session,
    settings: Settings,
    prepared: Prepared,
    facts: list[Fact],
    vectors: dict[int, Vectors],
) -> Unsettled:
    """Facts of list-like keys with memories of that key the prompt did not show (an
    exact repeat excepted: the write confirms it by its hash), and facts of a key new to
    the scope with the memories of its close keys (shown or not: the model saw them
    under another name). New aliases follow FOLLOW_UP_ALIASES, apart from any the first
    prompt used."""
    first_prompt = list(prepared.aliases.values())
    shown = {memory_id: alias for alias, memory_id in prepared.aliases.items()}
    scope = prepared.claim.key.scope
    unsettled: Unsettled = []
    for i, fact in enumerate(facts):
        key = key_for(fact.name, fact.content)
        if not key or fact.replaces is not None or fact.same_as is not None:
            continue
        if fact.confidence < settings.extraction.min_confidence:
            continue  # the gate drops it: not worth a call
        memories = [] if fact.single else _same_key(session, scope, key, fact, first_prompt)
        if key not in prepared.scope_keys:
            for other in candidate_keys(session, settings, scope, prepared, fact, vectors.get(i)):
                found = same_key_memories(session, scope, other, fact.category)
                memories += found[:CROSS_KEY_MEMORIES]
        views = []
        for memory in memories:
            if memory.id not in shown:
                shown[memory.id] = FOLLOW_UP_ALIASES + len(prepared.aliases) + 1
                prepared.aliases[shown[memory.id]] = memory.id
            views.append(MemoryView(shown[memory.id], memory.category, memory.name, memory.content))
        if views:
            unsettled.append((fact, views))
    return unsettled


def _event_kept(memory: MemoryView, fact: Fact) -> bool:
    """A dated event is history to a fact of a key that holds several values: without a
    day, such a fact does not retire it ("Ran my first half marathon on 2026-04-12" stays
    beside "Runs four times a week", whatever the follow-up call said). A single-valued
    key's new value retires the old, dated or not."""
    return not fact.single and names_a_day(memory.content) and not names_a_day(fact.content)


def _same_key(
    session: Session, scope: Scope, key: str, fact: Fact, shown: list[int]
) -> list[Memory]:
    digest = content_hash(fact.content)
    found = same_key_memories(session, scope, key, fact.category, exclude=shown)
    return [m for m in found if m.content_hash != digest]


def _ask(
    settings: Settings,
    extractor: LLMExtractor,
    prepared: Prepared,
    proposal: Proposal,
    unsettled: Unsettled,
) -> None:
    """One call for the whole batch; its decisions become the facts' own."""
    # Within the same share of a prompt as the first call's memories; the ones left
    # out are kept, as a fact of a list-like key leaves them without a decision.
    views = fit_memories(
        list(dict.fromkeys(v for _, shown in unsettled for v in shown)),
        settings.extraction.extract_memory_tokens,
    )
    messages = load_prompt(RESOLVE_PROMPT).render(
        facts="\n".join(render_fact(i, fact) for i, (fact, _) in enumerate(unsettled, 1)),
        memories=render_memories(views),
    )
    given = {v.alias for v in views}
    result = extractor.client.complete_json(settings.llm.extraction_model, messages, ResolveOutput)
    proposal.llm_calls += result.calls
    proposal.tokens_in += result.tokens_in
    proposal.tokens_out += result.tokens_out
    for decision in result.value.decisions:
        if not 1 <= decision.fact <= len(unsettled):
            continue  # a number the call was not given
        fact, shown = unsettled[decision.fact - 1]
        own = {v.alias: v for v in shown if v.alias in given}  # the ones it was shown
        fact.replaces = decision.replaces if decision.replaces in own else None
        fact.same_as = decision.same_as if decision.same_as in own else None
        if fact.replaces is not None and _event_kept(own[fact.replaces], fact):
            fact.replaces = None
        linked = own.get(fact.replaces or fact.same_as or 0)
        if linked is not None:
            take_key(prepared, proposal, fact, linked)
