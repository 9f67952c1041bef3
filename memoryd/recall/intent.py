"""What a question's words say it wants, beyond its topic (seed 004: recall that adapts
to the question). Rules, each measured by bench/extraction.py's recall@1:

- a question that names a subject key's slot ("who is my manager?") wants the memories
  of every key that names it ("team lead", "组长"), found by key even when none of their
  words is the question's; recall ranks them first among its matches (rank.py);
- a question about the present ("where does she live now?", "现在住哪") wants the newest
  active value of a subject key: where two active memories of one key compete (a change
  not yet reconciled, a list-like key), the newest said takes the best place the key's
  memories hold among the hits;
- a "when" question ("when did I…", "什么时候") wants dated episodes; one about how to
  behave ("how should you reply?", "怎么回答") wants feedback and procedures; one naming
  a person ("what does Anna do?", "我妹妹…") wants the memories keyed to that person
  ("sister anna home city"). Each is a signal rank.py weighs (MEMORYD_RANK_WEIGHT_INTENT)
  among the question's matches, never a filter.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Executable, bindparam, select
from sqlalchemy.orm import Session

from memoryd.memories.synonyms import asked_slot_keys
from memoryd.models.base import written_in
from memoryd.models.db import is_sqlite
from memoryd.models.tables import Category, Memory
from memoryd.recall.search import (
    LIST_LIMIT,
    SCORING_COLUMNS,
    Scored,
    listed,
    newest_in_scope,
    scope_filters,
    shape,
)
from memoryd.text import RELATIONS_EN, RELATIONS_ZH

_PRESENT = re.compile(
    r"\b(?:now|currently|current|these days|nowadays|at the moment|at present|still|today)\b"
    r"|现在|目前|如今|眼下|最近|当前",
    re.IGNORECASE,
)
# The hits reordered: past these, a memory's place does not change what a caller reads.
WINDOW = 30


_WHEN = re.compile(
    r"\b(?:when|what day|what date|which day|how long ago|since when)\b"
    r"|什么时候|哪天|哪一天|几号|几月|多久以前|何时",
    re.IGNORECASE,
)
_GUIDANCE = re.compile(
    r"\bhow (?:should|do|would) (?:you|i want you to) (?:answer|reply|respond|write|talk|format)"
    r"|\b(?:my|the user's) (?:preferences? for|instructions? for) (?:answers|replies)\b"
    r"|\bhow (?:do|does) (?:i|the user) (?:like|want|prefer) (?:answers|replies|responses)\b"
    r"|怎么回答|怎么回复|如何回复|如何回答|回答的方式|回复的方式",
    re.IGNORECASE,
)
_PERSON = re.compile(
    rf"\b(?:{RELATIONS_EN})\b|{RELATIONS_ZH}|(?<=[a-z,] )(?-i:[A-Z][a-z]{{2,20}})\b",
    re.IGNORECASE,
)
_GUIDANCE_CATEGORIES = frozenset({Category.FEEDBACK.value, Category.PROCEDURE.value})


@dataclass(frozen=True)
class Intent:
    """What a question asks for beyond its topic."""

    dated: bool = False  # a "when" question
    guidance: bool = False  # how to behave
    persons: frozenset[str] = frozenset()  # the people it names, as key words

    def __bool__(self) -> bool:
        return self.dated or self.guidance or bool(self.persons)

    def wants(self, row: Any) -> bool:
        """Whether a candidate (its SCORING_COLUMNS) is what the question asks for."""
        if self.dated and row.category == Category.EPISODE.value and row.occurred_at:
            return True
        if self.guidance and row.category in _GUIDANCE_CATEGORIES:
            return True
        return bool(self.persons) and bool(self.persons & set(row.name_key.split()))


def intent_of(query: str) -> Intent:
    persons = frozenset(m.group().casefold() for m in _PERSON.finditer(query))
    return Intent(bool(_WHEN.search(query)), bool(_GUIDANCE.search(query)), persons)


def key_rows(
    session: Session,
    params: Mapping[str, Any],
    terms: Sequence[str],
    whole: Sequence[Any] | None = None,
) -> list[Any]:
    """SCORING_COLUMNS of the memories search_params' `params` select that are stored
    under a key of a slot the question names (the partial index on the scope's keys),
    the newest LIST_LIMIT. From the scope's rows when recall read it `whole` (up to
    SCAN_LIMIT): a round trip fewer on PostgreSQL."""
    keys = asked_slot_keys(frozenset(terms))
    if not keys:
        return []
    if whole is not None:
        asked = frozenset(keys)
        keyed = [row for row in whole if row.name_key in asked]
        keyed.sort(key=lambda row: (row.updated_at, row.id), reverse=True)
        return keyed[:LIST_LIMIT]
    read = _keyed(*shape(params), postgres=not is_sqlite(session))
    return list(session.connection().execute(read, {**params, "keys": list(keys)}).all())


@functools.cache
def _keyed(categories: bool, tiers: bool, postgres: bool) -> Executable:
    """key_rows' statement, built once per shape and database: the newest LIST_LIMIT.
    The partial key index's condition is stated, written in the text: SQLite's planner
    cannot infer `<> ''` from the IN list and read the whole scope without it (4 ms at
    5,000 memories), and PostgreSQL's generic plan for the prepared statement, which
    sees parameters, walked the scope by status and filtered the keys
    (tests/recall/test_plans.py). PostgreSQL reads each user's keys by index
    (search.each_user); SQLite keeps the users in one list, since over a union it walks
    each user's every memory in the scope index's date order instead."""
    keyed = (listed(Memory.name_key, "keys", postgres), Memory.name_key != written_in(""))
    by_key = select(*SCORING_COLUMNS).where(*keyed)
    if postgres:
        return newest_in_scope(by_key, categories, tiers, LIST_LIMIT)
    return (
        by_key.where(Memory.user_id.in_(bindparam("users", expanding=True)))
        .where(*scope_filters(categories, tiers))
        .order_by(Memory.updated_at.desc(), Memory.id.desc())
        .limit(LIST_LIMIT)
    )


def asks_about_now(query: str) -> bool:
    return bool(_PRESENT.search(query))


def newest_value_first(top: Scored, rows: Mapping[int, Any]) -> Scored:
    """`top` with each subject key's memories, within the first WINDOW, in the places
    they held, newest said first. `rows` are the candidates' SCORING_COLUMNS, their keys
    and when they were said among them: nothing is read."""
    head, tail = top[:WINDOW], top[WINDOW:]
    places: dict[str, list[int]] = {}
    for place, (_score, mid, _signals) in enumerate(head):
        if key := rows[mid].name_key:
            places.setdefault(key, []).append(place)
    reordered = list(head)
    for key_places in places.values():
        if len(key_places) < 2:
            continue
        items = sorted(
            (head[p] for p in key_places), key=lambda i: rows[i[1]].said_at, reverse=True
        )
        for place, item in zip(key_places, items, strict=True):
            reordered[place] = item
    return reordered + tail
