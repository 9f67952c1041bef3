"""The answer's mends that read the batch as a whole (amend.py runs them): one value per
single-valued slot and batch; the single-valued changes the rules read that the answer
left out; a value told as a change ("from now on", "不再") retiring the one memory of its
key, and the old value restated beside it dropped; a change told that the answer left
out; a turn instructing the memory. With the batch and the result they share.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import date

from memoryd.extraction import evidence
from memoryd.extraction.views import MemoryView
from memoryd.memories import fact_rules
from memoryd.memories.proposals import Fact
from memoryd.memories.subjects import key_for, subject_key
from memoryd.memories.synonyms import slot_name

# A turn that tries to instruct the memory rather than tell it something: no fact it alone
# supports is kept, whatever the model made of it.
_INSTRUCTION = re.compile(
    r"\b(?:ignore|disregard|forget) (?:all |any |the )?(?:previous|prior|above|earlier|your) "
    r"(?:instructions|rules|prompts?)\b|\bsystem (?:note|prompt|message)\b|\bnote to memory\b"
    r"|忽略(?:之前|以上|前面|上面)的?(?:所有)?(?:指令|指示|规则|提示)|系统提示|系统消息|记忆模块",
    re.IGNORECASE,
)


@dataclass
class Amended:
    facts: list[Fact]
    dropped: Counter[str] = field(default_factory=Counter)  # refused, by reason
    changes: Counter[str] = field(default_factory=Counter)  # what was mended, by kind


@dataclass
class Batch:
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


def drop_restated_old(batch: Batch, result: Amended) -> None:
    """A fact repeating the words of a memory another fact of the answer replaces is the
    old value restated: kept, it would stand beside the new one as a fresh memory."""
    retired = [batch.memories[f.replaces] for f in result.facts if f.replaces in batch.memories]
    old = [evidence.words(m.content) for m in retired]
    for fact in list(result.facts):
        if fact.replaces is None and evidence.words(fact.content) in old:
            result.facts.remove(fact)
            result.dropped["restated_old_value"] += 1


# The user telling that a value changed ("from now on", "no longer", "改成"), and not
# adding one more ("also", "也"; not "too", which is as often "too expensive").
_CHANGE = re.compile(
    r"\b(?:from now on|no longer|not any ?more|anymore|instead|switched|changed)\b"
    r"|从现在(?:开始|起)|以后都|不再|改成|换成|改为|已经不|(?<!修)改(?:喝|吃|用|穿|坐|听|看)"
    r"|不(?:要|喝|吃)了",
    re.IGNORECASE,
)


# Doing one thing in place of another ("rewrote it in FastAPI, Flask was getting messy").
_REPLACING = re.compile(
    r"\b(?:rewr(?:o|i)te|rewritten|replaced|ported|migrated|moved (?:off|away from)|dropped"
    r"|ditched|gave up|quit)\b|换掉|弃用|迁移到|重写",
    re.IGNORECASE,
)

# "也" adds one more ("我也喜欢猫"); "也不" is one less ("燕麦奶也不要了").
_ADDING = re.compile(r"\b(?:also|as well|another)\b|也(?![不没])|还有", re.IGNORECASE)


def changed(fact: Fact, batch: Batch, result: Amended) -> Fact:
    """A fact whose telling sentence says the value changed replaces the one memory shown
    under its key, which the model left in place ("I need aisle seats from now on" after
    "prefers window seats", a key the model made list-like)."""
    key = subject_key(fact.name)
    if not key or fact.replaces is not None or fact.same_as is not None:
        return fact
    if not tells_change(fact, batch):
        return fact
    same_key = [m for m in batch.memories.values() if key_for(m.name, m.content) == key]
    if len(same_key) != 1 or evidence.words(same_key[0].content) == evidence.words(fact.content):
        return fact
    result.changes["told_change"] += 1
    return fact.model_copy(update={"replaces": same_key[0].alias})


# The user ending something they had: "咖啡店我转出去了", "I sold the bakery".
_ENDED = re.compile(
    r"\b(?:sold|shut down|gave up|quit)\b|转出去|转让了|关掉了|不开了|不干了|卖掉了|辞职了|离职了",
    re.IGNORECASE,
)


def ended(fact: Fact, batch: Batch, result: Amended) -> Fact:
    """A fact whose telling sentence says the user ended what one memory shown says they
    have, whatever its key, retires it ("咖啡店我转出去了，现在在泉州开民宿" after
    "我在厦门开了家咖啡店"): stated by the user of themselves, and the clause that ends
    it naming two of the memory's words ("I sold my old bike, still riding the new one"
    ends no riding)."""
    if fact.replaces is not None or fact.same_as is not None:
        return fact
    sentence = evidence.best_sentence(fact.content, batch.said)
    if sentence is None or _ADDING.search(sentence) or _NOT_STATED.search(sentence):
        return fact
    clause = next((c for c in _CLAUSES.split(sentence) if _ENDED.search(c)), None)
    if clause is None or not _I_CHANGED.search(clause):
        return fact
    if evidence.person_of(clause, batch.user_names, batch.known_names) is not None:
        return fact
    about = _sharing_words(batch, evidence.words(clause))
    if len(about) != 1:
        return fact
    result.changes["told_ending"] += 1
    return fact.model_copy(update={"replaces": about[0].alias})


def _sharing_words(batch: Batch, mine: set[str], overlap: float = 0.0) -> list[MemoryView]:
    """The memories shown that share TOLD_CHANGE_WORDS of `mine`, and at least `overlap`
    of their own words."""
    about = []
    for memory in batch.memories.values():
        theirs = evidence.words(memory.content)
        shared = len(mine & theirs)
        if theirs and shared >= TOLD_CHANGE_WORDS and shared / len(theirs) >= overlap:
            about.append(memory)
    return about


def tells_change(fact: Fact, batch: Batch) -> bool:
    sentence = evidence.best_sentence(fact.content, batch.said) or fact.content
    return _CHANGE.search(sentence) is not None and _ADDING.search(sentence) is None


def names_old_value(fact: Fact, memory: MemoryView, batch: Batch) -> bool:
    """Whether the sentence telling a fact names what the memory said of the same key and
    the fact leaves out: "I rewrote it in FastAPI, Flask was getting messy" retires the
    Flask memory of "side project", a key that holds several values."""
    sentence = evidence.best_sentence(fact.content, batch.said)
    if sentence is None or _ADDING.search(sentence):
        return False
    if not (_CHANGE.search(sentence) or _REPLACING.search(sentence)):
        return False  # "I started climbing with my tennis buddy" retires no tennis
    old = evidence.words(memory.content) - evidence.words(memory.name)
    return bool(old & evidence.words(sentence) - evidence.words(fact.content))


def told_by_an_instruction(content: str, batch: Batch) -> bool:
    """Whether the turn that tells this fact best is one instructing the memory."""
    sentence = evidence.best_sentence(content, batch.said)
    turn = next((t for t in batch.said if sentence and sentence in t), None)
    return turn is not None and _INSTRUCTION.search(turn) is not None


# How each of the offline rules writes its fact, with the value it read as `x`
# ("Lives in {x}", "Favourite {slot} is {x}", "和{x}分手了"), most literal words first.
_TEMPLATES = [
    re.compile(
        "".join(
            {"{x}": "(?P<x>.+?)", "{slot}": r"[\w' ]{2,30}?"}.get(part, re.escape(part))
            for part in re.split(r"(\{x\}|\{slot\})", template)
        ),
        re.IGNORECASE,
    )
    for template in sorted(
        {r.template for r in fact_rules.RULES if "{x}" in r.template and r.template != "{x}"},
        key=lambda t: len(t.replace("{x}", "").replace("{slot}", "")),
        reverse=True,
    )
]


def rule_value(rule: Fact) -> str:
    """What a rule's fact says, without its template's words."""
    for template in _TEMPLATES:
        if match := template.fullmatch(rule.content):
            return match["x"]
    return rule.content


def one_value_per_slot(batch: Batch, result: Amended) -> None:
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


def add_rule_changes(batch: Batch, result: Amended) -> None:
    """A single-valued fact the rules read in the turns that the answer does not carry,
    said as true by the user about themselves (said_as_true). Of a slot the scope holds
    (under any of its names), the value the user just said is the slot's: a fact of the
    answer holding another value for it (a small model restating the old one) gives way
    to the rules' fact, so the old value still retires. Of a new slot, the rules' fact is
    added unless the answer holds its value under another key."""
    held_slots = {slot_name(k) for k in batch.keys}
    for rule, value in zip(batch.rule_facts, batch.rule_values, strict=True):
        slot = slot_name(subject_key(rule.name))
        if not (rule.single and value) or not said_as_true(rule, batch):
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
# "Would I need a visa?", "如果我搬到…". "跟你说", "说实话", "说正事" are the user
# telling the assistant.
_NOT_STATED = re.compile(
    r"[?？]|\b(?:if|would|could|should|hypothetically|imagine|suppose|supposing|whether"
    r"|said|says|told|tells|thinks|thought)\b|如果|假如|要是|假设|吗"
    r"|(?<!跟你)(?<!和你)(?<!对你)(?<!给你)(?<!跟您)说(?!实话|真的|正事|一声|一下|起来|白了)过?",
    re.IGNORECASE,
)


def said_as_true(rule: Fact, batch: Batch) -> bool:
    """Whether the sentence the rules read states the fact as the user's own: not a
    question, a supposition or reported speech ("My sister Anna said: I moved to
    Madrid"), not in a turn instructing the memory, not about someone else."""
    sentence = evidence.best_sentence(rule.content, batch.said)
    if sentence is None or _NOT_STATED.search(sentence):
        return False
    if told_by_an_instruction(rule.content, batch):
        return False
    # The clause holding the value: "Karen moved on, so Jürgen is leading our team now"
    # tells of Karen first, then of the user's team.
    value = rule_value(rule).casefold()
    clause = next((c for c in _CLAUSES.split(sentence) if value in c.casefold()), sentence)
    return evidence.person_of(clause, batch.user_names, batch.known_names) is None


_CLAUSES = re.compile(r"[,;，；]\s*|\s+(?:so|and|but|because|then)\s+", re.IGNORECASE)


# A memory shown is the one a told change is about when the sentence holds this part of
# its salient words, and two of them at least ("我现在咖啡改喝纯黑的了，燕麦奶也不要了"
# of "喝咖啡不加糖，只要燕麦奶").
TOLD_CHANGE_OVERLAP = 0.3
TOLD_CHANGE_WORDS = 2
# The user as the one who changed: "I switched…", "我现在改喝…"; not "The cafe near my
# office switched to oat milk", "公司楼下的咖啡店换成燕麦奶了".
_I_CHANGED = re.compile(r"\bI\b|我(?!们?的|们?家的|们?公司)", re.IGNORECASE)


def add_told_changes(batch: Batch, result: Amended) -> None:
    """A sentence of the user's saying a value changed, that no fact of the answer tells,
    about exactly one memory shown: the sentence becomes that memory's new value. A small
    model answering about another part of the batch leaves such a change out."""
    linked = {f.replaces for f in result.facts} | {f.same_as for f in result.facts}
    told = [evidence.words(f.content) for f in result.facts]
    for sentence in evidence.sentences(batch.said):
        if not _CHANGE.search(sentence) or not _I_CHANGED.search(sentence):
            continue
        if _ADDING.search(sentence) or _NOT_STATED.search(sentence):
            continue
        mine = evidence.words(sentence)
        if any(len(mine & words) >= len(words) / 2 for words in told if words):
            continue  # the answer tells it
        if told_by_an_instruction(sentence, batch) or evidence.person_of(
            sentence, batch.user_names, batch.known_names
        ):
            continue
        about = _sharing_words(batch, mine, TOLD_CHANGE_OVERLAP)
        if len(about) != 1 or about[0].alias in linked:
            continue
        memory = about[0]
        content = sentence.rstrip("。.!！")
        result.facts.append(
            Fact(
                content=content,
                category=memory.category,
                name=memory.name,
                single=True,
                confidence=0.9,
                replaces=memory.alias,
            )
        )
        linked.add(memory.alias)
        result.changes["told_change_added"] += 1
