"""A fact under a key the scope does not hold may name one it does in other words
(memories/synonyms.py). This module decides which of the scope's keys it may be:

- an alias learnt earlier, the synonym rule, or the same words in another order or
  with words any key may hold ("diet update") land it on the scope's key at once;
- otherwise the scope's close keys are candidates: those sharing its content words and,
  when embeddings are on, the keys of the memories nearest the fact's meaning (across
  languages, with a multilingual model). Their memories join the batch's follow-up call
  (extraction/resolve.py); only the model's answer moves the fact to one of them, and
  then the scope learns the alias.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.extraction.prepare import Prepared
from memoryd.extraction.views import MemoryView, Proposal
from memoryd.memories.proposals import Fact
from memoryd.memories.subjects import key_categories, key_for
from memoryd.memories.synonyms import close_keys, rule_synonym, same_words, single_valued
from memoryd.models.keys import Scope
from memoryd.models.tables import Memory
from memoryd.recall.embedders import Vectors
from memoryd.recall.embeddings import embed_query
from memoryd.recall.scope_vectors import closest
from memoryd.settings import Settings

CLOSE_KEYS = 3  # candidate keys of one fact at most
NEAREST = 10  # memories nearest a fact's meaning whose keys are read


def land_on_known_keys(prepared: Prepared, proposal: Proposal) -> None:
    """A fact named by a learnt alias, or by a key the synonym rule or the same words
    tie to one the scope holds, takes the scope's key."""
    for fact in proposal.facts:
        key = key_for(fact.name, fact.content)
        if not key or key in prepared.scope_keys:
            continue
        target = prepared.key_aliases.get(key)
        kind = "key_from_alias"
        if target is None:
            target = rule_synonym(key, prepared.scope_keys)
            kind = "key_by_synonym_rule"
        if target is None:
            target = same_words(key, prepared.scope_keys)
            kind = "key_by_same_words"
        if target is not None:
            rename(fact, target)
            proposal.amended[kind] += 1
            if kind != "key_from_alias":
                prepared.new_aliases[key] = target


def rename(fact: Fact, key: str) -> None:
    fact.name = key
    fact.single = fact.single or single_valued(key)


def new_key_vectors(
    settings: Settings, prepared: Prepared, facts: Sequence[Fact]
) -> dict[int, Vectors]:
    """The meaning of each fact of a key new to the scope, by index (embeddings on):
    computed before any transaction, as embedding may be a call."""
    if not settings.embeddings_on:
        return {}
    vectors = {}
    for i, fact in enumerate(facts):
        key = key_for(fact.name, fact.content)
        if key and key not in prepared.scope_keys:
            vector = embed_query(settings, fact.content)
            if vector is not None:
                vectors[i] = vector
    return vectors


def candidate_keys(
    session: Session,
    settings: Settings,
    scope: Scope,
    prepared: Prepared,
    fact: Fact,
    vector: Vectors | None,
) -> list[str]:
    """The scope's keys `fact`'s new key may be another name of, closest first."""
    key = key_for(fact.name, fact.content)
    found = close_keys(key, prepared.scope_keys, CLOSE_KEYS)
    if vector is not None:
        ids = [found_id for found_id, _ in closest(session, settings, scope, vector, NEAREST)]
        rows = session.execute(
            select(Memory.name_key).where(
                Memory.id.in_(ids),
                Memory.of(scope),
                Memory.category.in_(key_categories(fact.category)),
            )
        )
        found += [k for (k,) in rows if k and k != key and k in prepared.scope_keys]
    return list(dict.fromkeys(found))[:CLOSE_KEYS]


def take_key(prepared: Prepared, proposal: Proposal, fact: Fact, linked: MemoryView) -> None:
    """The model tied the fact to a memory of another key: the fact takes that key, and
    its own becomes the key's alias in the scope."""
    key, target = key_for(fact.name, fact.content), key_for(linked.name, linked.content)
    if target and key != target:
        rename(fact, target)
        prepared.new_aliases[key] = target
        proposal.amended["key_by_follow_up"] += 1
