"""What the pipeline mends in a model's answer before anything is written, so that a weak
model still leaves a right store. Measured by bench/extraction.py with real models:

- a request copied as the fact ("Please remember that …", "记住…") becomes its statement;
  a question or a request to the assistant ("Can you suggest…?", "帮我…") is no fact;
- relative times left in a fact ("last week") are written as dates (dates.py);
- a fact about someone else is not stored as the user's: a name only the memories shown
  carry is refused, and a fact told about a person in the user's life gets that person
  in its content and key, so it never retires the user's own value (evidence.py);
- a fact without a key gets one: the offline rules' slot for the same value, or a key of
  the scope that its content names;
- a fact told as a change ("from now on", "不再") replaces the one memory of its key;
- where the rules see a single-valued change ("I moved to X", "call me Y", "我搬到…") of
  a key the scope already holds, the fact carries that key, or the rules' fact is added;
- a confidence the model gives every fact is weighed by the evidence: how much of the
  fact the user said, and whether the rules read the same.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, tzinfo

from memoryd.extraction import evidence, offline
from memoryd.extraction.dates import resolve_relative
from memoryd.extraction.views import MemoryView, TurnView
from memoryd.memories import fact_rules
from memoryd.memories.subjects import key_for, subject_key
from memoryd.memories.synonyms import single_valued, slot_name
from memoryd.models.proposals import Fact
from memoryd.models.tables import Category
from memoryd.zones import local

_REQUEST = re.compile(
    r"^\s*(?:(?:please|pls|and|also|oh),?\s+)*(?:(?:do\s+)?remember|don't forget|do not forget|"
    r"note|keep in mind)(?:\s+that|\s*:|,)?\s+"
    r"|^\s*(?:请|麻烦)?(?:记住|记得|别忘了|帮我记一下)[:：,，]?\s*",
    re.IGNORECASE,
)
# A question, or a request to the assistant, written down as if it were a fact: what
# the user asked for is not something true about them ("Can you suggest a few dinners?",
# "推荐几个周末能去的地方吧。", "简历上也帮我换一下。").
_ASKING = re.compile(
    r"[?？]\s*$|^\s*(?:(?:can|could|would|will) you|please (?:help|suggest|recommend|tell|"
    r"give|find|show|explain|write)|(?:help|suggest|recommend|tell|give|show) me)\b"
    r"|^\s*(?:请你?|麻烦你?)?(?:推荐|建议|介绍|讲讲|说说|告诉我|给我)|帮我|请你|吧[。！!]?\s*$",
    re.IGNORECASE,
)
_TAUTOLOGY = re.compile(r"^\s*(?P<x>.{1,30}?)\s*(?:是|is|are)\s*(?P=x)\s*[.。!！]?\s*$", re.I)
# A turn that tries to instruct the memory rather than tell it something: no fact it alone
# supports is kept, whatever the model made of it.
_INSTRUCTION = re.compile(
    r"\b(?:ignore|disregard|forget) (?:all |any |the )?(?:previous|prior|above|earlier|your) "
    r"(?:instructions|rules|prompts?)\b|\bsystem (?:note|prompt|message)\b|\bnote to memory\b"
    r"|忽略(?:之前|以上|前面|上面)的?(?:所有)?(?:指令|指示|规则|提示)|系统提示|系统消息|记忆模块",
    re.IGNORECASE,
)
# The evidence's word on a fact's confidence: the part of its words the user said.
# A quarter of its words is still the user's fact in other words; less is not said.
SUPPORT_CAPS = ((0.5, 1.0), (0.25, 0.9), (0.0, 0.5))
NAME_KEYS = frozenset({"name", "preferred name", "名字", "称呼"})


@dataclass
class Amended:
    facts: list[Fact]
    dropped: Counter[str] = field(default_factory=Counter)  # refused, by reason
    changes: Counter[str] = field(default_factory=Counter)  # what was mended, by kind


@dataclass
class _Batch:
    """What the amendments read: the user's turns, the memories and keys shown."""

    said_on: list[tuple[str, date]]  # (content, the day it was said in the user's zone)
    keys: set[str]
    user_names: set[str]
    known_names: set[str]
    rule_facts: list[Fact]
    rule_values: list[set[str]]  # the salient words of the value each rule fact read
    memories: dict[int, MemoryView]  # shown, by alias
    borrowable: set[str] = field(default_factory=set)  # the prompt's example names

    @property
    def said(self) -> list[str]:
        return [content for content, _day in self.said_on]

    @property
    def shown(self) -> list[str]:
        return [m.content for m in self.memories.values()]


def amend(
    facts: Sequence[Fact],
    turns: Sequence[TurnView],
    memories: Sequence[MemoryView],
    keys: Sequence[str],
    zone: tzinfo,
    strict: bool = False,
    examples: str = "",
) -> Amended:
    """The answer's facts, mended. `strict` (MEMORYD_SMALL_MODEL_CHECKS) also weighs each
    fact's confidence by the evidence, keeps `replaces`/`same_as` only to a memory about
    the same subject, takes `single` from the key rather than from the model, and refuses
    names the user never said that the memories shown or the prompt's `examples` hold."""
    batch = _read_batch(turns, memories, keys, zone)
    batch.borrowable = evidence.names_in([examples]) if examples else set()
    result = Amended([])
    for fact in facts:
        mended = _amend_fact(fact, batch, result)
        if mended is not None and strict:
            mended = _checked(mended, batch, result)
        if mended is not None:
            result.facts.append(mended)
    _one_value_per_slot(batch, result)
    _add_rule_changes(batch, result)
    _drop_restated_old(batch, result)
    return result


def _drop_restated_old(batch: _Batch, result: Amended) -> None:
    """A fact repeating the words of a memory another fact of the answer replaces is the
    old value restated: kept, it would stand beside the new one as a fresh memory."""
    retired = [batch.memories[f.replaces] for f in result.facts if f.replaces in batch.memories]
    old = [evidence.words(m.content) for m in retired]
    for fact in list(result.facts):
        if fact.replaces is None and evidence.words(fact.content) in old:
            result.facts.remove(fact)
            result.dropped["restated_old_value"] += 1


def _read_batch(
    turns: Sequence[TurnView], memories: Sequence[MemoryView], keys: Sequence[str], zone: tzinfo
) -> _Batch:
    users = [t for t in turns if t.role == "user"]
    said = [t.content for t in users]
    shown = [m.content for m in memories]
    user_names = {
        word.lower()
        for m in memories
        if subject_key(m.name) in NAME_KEYS
        for word in re.findall(r"\b[A-Z][a-z]+\b", m.content)
    }
    existing = {m.alias: (m.name, m.content) for m in memories}
    rule_facts = offline.extract_facts([("user", s) for s in said], existing)
    return _Batch(
        said_on=[(t.content, local(t.at, zone).date()) for t in users],
        keys=({subject_key(k) for k in keys} | {key_for(m.name, m.content) for m in memories})
        - {""},
        user_names=user_names,
        known_names=evidence.person_names([*said, *shown]) - user_names,
        rule_facts=rule_facts,
        rule_values=[evidence.words(_rule_value(r)) for r in rule_facts],
        memories={m.alias: m for m in memories},
    )


def _amend_fact(fact: Fact, batch: _Batch, result: Amended) -> Fact | None:
    content = _restated(fact.content)
    if content != fact.content:
        result.changes["restated_request"] += 1
    if _ASKING.search(content):
        result.dropped["request_not_fact"] += 1
        return None
    if _TAUTOLOGY.match(content):
        result.dropped["tautology"] += 1
        return None
    if _told_by_an_instruction(content, batch):
        result.dropped["instruction_in_turn"] += 1
        return None
    fact = fact.model_copy(update={"content": content})
    fact = _about_whom(fact, batch, result)
    fact = _dated(fact, batch, result)
    fact = _changed(_keyed(fact, batch, result), batch, result)
    return _repeated(fact, batch, result)


# The user telling that a value changed ("from now on", "no longer", "改成"), and not
# adding one more ("also", "too", "也").
_CHANGE = re.compile(
    r"\b(?:from now on|no longer|not any ?more|anymore|instead|switched|changed)\b"
    r"|从现在(?:开始|起)|以后都|不再|改成|换成|改为|已经不",
    re.IGNORECASE,
)
_ADDING = re.compile(r"\b(?:also|too|as well|another)\b|也|还有|又", re.IGNORECASE)


def _changed(fact: Fact, batch: _Batch, result: Amended) -> Fact:
    """A fact whose telling sentence says the value changed replaces the one memory shown
    under its key, which the model left in place ("I need aisle seats from now on" after
    "prefers window seats", a key the model made list-like)."""
    key = subject_key(fact.name)
    if not key or fact.replaces is not None or fact.same_as is not None:
        return fact
    if not _tells_change(fact, batch):
        return fact
    same_key = [m for m in batch.memories.values() if key_for(m.name, m.content) == key]
    if len(same_key) != 1 or evidence.words(same_key[0].content) == evidence.words(fact.content):
        return fact
    result.changes["told_change"] += 1
    return fact.model_copy(update={"replaces": same_key[0].alias})


def _tells_change(fact: Fact, batch: _Batch) -> bool:
    sentence = evidence.best_sentence(fact.content, batch.said) or fact.content
    return _CHANGE.search(sentence) is not None and _ADDING.search(sentence) is None


def _told_by_an_instruction(content: str, batch: _Batch) -> bool:
    """Whether the turn that tells this fact best is one instructing the memory."""
    sentence = evidence.best_sentence(content, batch.said)
    turn = next((t for t in batch.said if sentence and sentence in t), None)
    return turn is not None and _INSTRUCTION.search(turn) is not None


def _repeated(fact: Fact, batch: _Batch, result: Amended) -> Fact:
    """A fact that "replaces" a memory saying the same words repeats it: it confirms."""
    memory = batch.memories.get(fact.replaces) if fact.replaces is not None else None
    if memory is None or evidence.words(memory.content) != evidence.words(fact.content):
        return fact
    result.changes["replaces_itself"] += 1
    return fact.model_copy(update={"replaces": None, "same_as": fact.same_as or memory.alias})


def _checked(fact: Fact, batch: _Batch, result: Amended) -> Fact | None:
    """What a small model's answer is held to beyond the rest (MEMORYD_SMALL_MODEL_CHECKS)."""
    # The user's own memory of the same subject is context, not another person: "Promoted
    # to audit manager at Deloitte" may carry the firm "Works at Deloitte" named.
    key = subject_key(fact.name)
    others = [
        m.content for m in batch.memories.values() if not key or key_for(m.name, m.content) != key
    ]
    if evidence.borrowed_names(fact.content, batch.said, others, batch.borrowable):
        result.dropped["other_person"] += 1
        return None
    fact = _single_by_key(fact, result)
    return _linked(_weighed(fact, batch, result), batch, result)


def _restated(content: str) -> str:
    """A request to remember, as the fact it asks to keep."""
    stripped = _REQUEST.sub("", content, count=1).strip()
    if not stripped or stripped == content.strip():
        return content
    return stripped[:1].upper() + stripped[1:]


def _about_whom(fact: Fact, batch: _Batch, result: Amended) -> Fact:
    """A fact the user told about someone else names that person in its content and key:
    "Moved to Madrid" from "My sister Anna moved to Madrid" is Anna's, not the user's."""
    person = evidence.person_of(fact.content, batch.user_names, batch.known_names)
    sentence = evidence.best_sentence(fact.content, batch.said)
    if person is None and sentence is not None:
        told = evidence.person_of(sentence, batch.user_names, batch.known_names)
        if told is not None and not evidence.mentions(fact.content, told):
            person = told
            result.changes["third_person_content"] += 1
            fact = fact.model_copy(update={"content": sentence})
    if person is None:
        return fact
    label = subject_key(person.label())
    key = subject_key(fact.name)
    if label and not key.startswith(label):
        result.changes["third_person_key"] += 1
        fact = fact.model_copy(update={"name": f"{label} {key}".strip()})
    return fact


def _dated(fact: Fact, batch: _Batch, result: Amended) -> Fact:
    """Relative times written as dates, from the day the telling turn was said."""
    sentence = evidence.best_sentence(fact.content, batch.said)
    said_on = next((day for text, day in batch.said_on if sentence and sentence in text), None)
    if said_on is None:
        said_on = batch.said_on[-1][1] if batch.said_on else None
    if said_on is None:
        return fact
    resolved = resolve_relative(fact.content, said_on)
    if not resolved.phrases:
        return fact
    result.changes["relative_dates"] += resolved.phrases
    update: dict[str, object] = {"content": resolved.text}
    first = resolved.first
    if fact.category == Category.EPISODE and fact.occurred_at is None and first is not None:
        update["occurred_at"] = first.start if first.kind == "day" else None
    return fact.model_copy(update=update)


def _keyed(fact: Fact, batch: _Batch, result: Amended) -> Fact:
    """The rules' slot when they read the same value; else a scope key the content names."""
    rule = _rule_for(fact, batch)
    if (
        rule is not None
        and rule.name
        and subject_key(fact.name) != subject_key(rule.name)
        and not evidence.person_of(fact.content, batch.user_names, batch.known_names)
    ):
        result.changes["key_from_rules"] += 1
        # The rules' category too: a key's memories are reconciled within one category.
        update = {"name": rule.name, "single": rule.single, "category": rule.category}
        return fact.model_copy(update=update)
    if subject_key(fact.name):
        return fact
    lower = fact.content.lower()
    for key in sorted(batch.keys, key=len, reverse=True):
        if key and re.search(rf"(?<!\w){re.escape(key)}(?!\w)", lower):
            result.changes["key_from_scope"] += 1
            return fact.model_copy(update={"name": key})
    said = fact_rules.slot_of_statement(fact.content)
    if said is not None:  # the fact is written as the rules write that slot
        result.changes["key_from_statement"] += 1
        return fact.model_copy(update={"name": said.name, "single": True})
    return fact


def _rule_for(fact: Fact, batch: _Batch) -> Fact | None:
    """The rules' fact of the same value: its words all in this fact."""
    mine = evidence.words(fact.content)
    for rule, value in zip(batch.rule_facts, batch.rule_values, strict=True):
        if value and value <= mine:
            return rule
    return None


# What the offline rules write before the value they read ("Lives in {x}" -> "Lives in ").
_TEMPLATE_HEADS = sorted(
    {r.template.split("{x}")[0] for r in fact_rules.RULES if r.template.endswith("{x}")} - {""},
    key=len,
    reverse=True,
)


def _rule_value(rule: Fact) -> str:
    """What a rule's fact says, without its template's words."""
    head = next((h for h in _TEMPLATE_HEADS if rule.content.startswith(h)), "")
    return rule.content[len(head) :]


def _weighed(fact: Fact, batch: _Batch, result: Amended) -> Fact:
    """The model's confidence, capped by how much of the fact the user said; the rules
    reading the same fact vouch for it."""
    share = evidence.support(fact.content, batch.said)
    if share is None:
        return fact
    cap = next(c for floor, c in SUPPORT_CAPS if share >= floor)
    if _rule_for(fact, batch) is not None:
        cap = max(cap, 0.9)
    if fact.confidence <= cap:
        return fact
    result.changes["confidence_capped"] += 1
    return fact.model_copy(update={"confidence": cap})


def _single_by_key(fact: Fact, result: Amended) -> Fact:
    """`single` as the key says, not as the model marked it."""
    single = single_valued(subject_key(fact.name))
    if single == fact.single:
        return fact
    result.changes["single_by_key"] += 1
    return fact.model_copy(update={"single": single})


# A link to a memory shown is kept when both have one key, or when they share this part of
# the memory's words: a small model fills `replaces` with any id it was shown.
LINK_OVERLAP = {"replaces": 0.3, "same_as": 0.5}


def _linked(fact: Fact, batch: _Batch, result: Amended) -> Fact:
    """`replaces` and `same_as` kept only where the memory is about the same subject: the
    same single-valued key, or enough of the same words."""
    update: dict[str, None] = {}
    for link, floor in LINK_OVERLAP.items():
        alias = getattr(fact, link)
        memory = batch.memories.get(alias) if alias is not None else None
        if memory is None:
            continue
        key = subject_key(fact.name)
        if key and key == subject_key(memory.name) and (fact.single or _tells_change(fact, batch)):
            continue  # one value for the key: the new one retires the old, words or not
        theirs = evidence.words(memory.content)
        if theirs and len(theirs & evidence.words(fact.content)) / len(theirs) >= floor:
            continue
        update[link] = None
        result.changes[f"unrelated_{link}"] += 1
    return fact.model_copy(update=update) if update else fact


def _one_value_per_slot(batch: _Batch, result: Amended) -> None:
    """One fact per single-valued slot and batch ("lead" and "team lead" are one): the one
    holding the value the rules read for that slot, else the last (the newest said)."""
    by_key: dict[str, list[Fact]] = {}
    for fact in result.facts:
        if fact.single and (key := subject_key(fact.name)):
            by_key.setdefault(slot_name(key), []).append(fact)
    for key, facts in by_key.items():
        if len(facts) < 2:
            continue
        values = [
            value
            for rule, value in zip(batch.rule_facts, batch.rule_values, strict=True)
            if slot_name(subject_key(rule.name)) == key
        ]
        read = [f for f in facts if any(v and v <= evidence.words(f.content) for v in values)]
        keep = (read or facts)[-1]
        for fact in facts:
            if fact is not keep:
                result.facts.remove(fact)
                result.dropped["same_slot_in_batch"] += 1


def _add_rule_changes(batch: _Batch, result: Amended) -> None:
    """A single-valued fact the rules read in the turns that the answer does not carry,
    said as true by the user about themselves (_said_as_true). Of a slot the scope holds
    (under any of its names), the value the user just said is the slot's: a fact of the
    answer holding another value for it (a small model restating the old one) gives way
    to the rules' fact, so the old value still retires. Of a new slot, the rules' fact is
    added unless the answer holds its value under another key."""
    held_slots = {slot_name(k) for k in batch.keys}
    for rule, value in zip(batch.rule_facts, batch.rule_values, strict=True):
        slot = slot_name(subject_key(rule.name))
        if not (rule.single and value) or not _said_as_true(rule, batch):
            continue
        held = slot in held_slots
        same_slot = [f for f in result.facts if slot_name(subject_key(f.name)) == slot]
        if any(value <= evidence.words(f.content) for f in (same_slot if held else result.facts)):
            continue  # the answer carries the value the rules read
        for fact in same_slot:
            result.facts.remove(fact)
            result.dropped["other_value_than_said"] += 1
        result.facts.append(rule)
        result.changes["rule_replacement" if held else "rule_added"] += 1


# A sentence that asks, supposes or reports rather than states: "If I moved to Paris…?",
# "Would I need a visa?", "如果我搬到…".
_NOT_STATED = re.compile(
    r"[?？]|\b(?:if|would|could|should|hypothetically|imagine|suppose|supposing|whether"
    r"|said|says|told|tells|thinks|thought)\b|如果|假如|要是|假设|吗|说过?",
    re.IGNORECASE,
)


def _said_as_true(rule: Fact, batch: _Batch) -> bool:
    """Whether the sentence the rules read states the fact as the user's own: not a
    question, a supposition or reported speech ("My sister Anna said: I moved to
    Madrid"), not in a turn instructing the memory, not about someone else."""
    sentence = evidence.best_sentence(rule.content, batch.said)
    if sentence is None or _NOT_STATED.search(sentence):
        return False
    if _told_by_an_instruction(rule.content, batch):
        return False
    # The clause holding the value: "Karen moved on, so Jürgen is leading our team now"
    # tells of Karen first, then of the user's team.
    value = _rule_value(rule).casefold()
    clause = next((c for c in _CLAUSES.split(sentence) if value in c.casefold()), sentence)
    return evidence.person_of(clause, batch.user_names, batch.known_names) is None


_CLAUSES = re.compile(r"[,;，；]\s*|\s+(?:so|and|but|because|then)\s+", re.IGNORECASE)
