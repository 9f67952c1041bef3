"""What the pipeline mends in a model's answer before anything is written, so that a weak
model still leaves a right store. Measured by bench/extraction.py with real models:

- a fact copied from the middle of a clause gets the clause's start back (the place or
  time said before the verb: "我们在苏州买了套房", "我昨天拿到驾照啦");
- a request copied as the fact ("Please remember that …", "记住…") becomes its statement;
  a question or a request to the assistant ("Can you suggest…?", "帮我…") is no fact;
- relative times left in a fact ("last week") are written as dates (dates.py);
- a fact about someone else is not stored as the user's: a name only the memories shown
  carry is refused, and a fact told about a person in the user's life gets that person
  in its content and key, so it never retires the user's own value (evidence.py), unless
  the person is the value of the user's slot ("男朋友阿杰": the partner);
- a fact without a key gets one: the offline rules' slot for the same value, or a key of
  the scope that its content names;
- a fact told as a change ("from now on", "不再") replaces the one memory of its key; a
  link to a memory whose value the telling sentence names is kept ("…in FastAPI, Flask
  was getting messy"); a change the answer left out replaces the one memory it is about;
  the user ending what a memory says they have retires it ("咖啡店我转出去了");
- where the rules see a single-valued change ("I moved to X", "call me Y", "我搬到…") of
  a key the scope already holds, the fact carries that key, or the rules' fact is added;
- a confidence the model gives every fact is weighed by the evidence: how much of the
  fact the user said, and whether the rules read the same.

The mends that read the batch as a whole are in amend_slots.py.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import tzinfo

from memoryd.extraction import evidence, offline
from memoryd.extraction.amend_slots import (
    Amended,
    Batch,
    add_rule_changes,
    add_told_changes,
    changed,
    drop_restated_old,
    ended,
    names_old_value,
    one_value_per_slot,
    rule_value,
    tells_change,
    told_by_an_instruction,
)
from memoryd.extraction.dates import resolve_relative
from memoryd.extraction.views import MemoryView, TurnView
from memoryd.memories import fact_rules
from memoryd.memories.proposals import Fact
from memoryd.memories.subjects import key_for, subject_key
from memoryd.memories.synonyms import same_words, single_valued, slot_name
from memoryd.models.tables import Category
from memoryd.zones import local

_REQUEST = re.compile(
    r"^\s*(?:(?:please|pls|and|also|oh),?\s+)*(?:(?:do\s+)?remember|don't forget|do not forget|"
    r"note|keep in mind)(?:\s+that|\s*:|,)?\s+"
    r"|^\s*(?:请|麻烦)?你?(?:帮我)?(?:记住|记得|别忘了|记一下)[:：,，]?\s*",
    re.IGNORECASE,
)
# A question, or a request to the assistant, written down as if it were a fact: what
# the user asked for is not something true about them ("Can you suggest a few dinners?",
# "推荐几个周末能去的地方吧。", "简历上也帮我换一下。"). A wish about replies ("Give me
# answers as bullet points") and a fact with such words ("妈妈每周帮我带孩子",
# "推荐人是王经理", "周末常去酒吧") are not requests.
_ASKING = re.compile(
    r"[?？]\s*$|^\s*(?:(?:can|could|would|will) you|please (?:help|suggest|recommend|find|"
    r"explain)|(?:suggest|recommend|find) me)\b"
    r"|^\s*(?:请你?|麻烦你?|能不能|可以)?(?:帮我|给我)?(?:推荐|建议|介绍|讲讲|说说|列)"
    r"(?:一下|几|一些|些|点|个)"
    r"|(?:^|[也再请你]|麻烦|能不能|可以)帮我",
    re.IGNORECASE,
)
_TAUTOLOGY = re.compile(r"^\s*(?P<x>.{1,30}?)\s*(?:是|is|are)\s*(?P=x)\s*[.。!！]?\s*$", re.I)
# The evidence's word on a fact's confidence: the part of its words the user said.
# A quarter of its words is still the user's fact in other words; less is not said.
SUPPORT_CAPS = ((0.5, 1.0), (0.25, 0.9), (0.0, 0.5))
NAME_KEYS = frozenset({"name", "preferred name", "名字", "称呼"})
PERSON_SLOTS = frozenset({"partner", "team lead"})  # slots whose value is a person


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
    one_value_per_slot(batch, result)
    add_rule_changes(batch, result)
    if strict:
        add_told_changes(batch, result)
    drop_restated_old(batch, result)
    return result


def _read_batch(
    turns: Sequence[TurnView], memories: Sequence[MemoryView], keys: Sequence[str], zone: tzinfo
) -> Batch:
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
    return Batch(
        said_on=[(t.content, local(t.at, zone).date()) for t in users],
        keys=({subject_key(k) for k in keys} | {key_for(m.name, m.content) for m in memories})
        - {""},
        user_names=user_names,
        known_names=evidence.person_names([*said, *shown]) - user_names,
        rule_facts=rule_facts,
        rule_values=[evidence.words(rule_value(r)) for r in rule_facts],
        memories={m.alias: m for m in memories},
    )


def _amend_fact(fact: Fact, batch: Batch, result: Amended) -> Fact | None:
    whole = _whole_clause(fact.content, batch, result)
    content = _restated(whole)
    if content != whole:
        result.changes["restated_request"] += 1
    if _ASKING.search(content):
        result.dropped["request_not_fact"] += 1
        return None
    if _TAUTOLOGY.match(content):
        result.dropped["tautology"] += 1
        return None
    if told_by_an_instruction(content, batch):
        result.dropped["instruction_in_turn"] += 1
        return None
    fact = fact.model_copy(update={"content": content})
    fact = _about_whom(fact, batch, result)
    fact = _dated(fact, batch, result)
    fact = changed(_keyed(fact, batch, result), batch, result)
    return _repeated(fact, batch, result)


def _repeated(fact: Fact, batch: Batch, result: Amended) -> Fact:
    """A fact that "replaces" a memory saying the same words repeats it: it confirms."""
    memory = batch.memories.get(fact.replaces) if fact.replaces is not None else None
    if memory is None or evidence.words(memory.content) != evidence.words(fact.content):
        return fact
    result.changes["replaces_itself"] += 1
    return fact.model_copy(update={"replaces": None, "same_as": fact.same_as or memory.alias})


def _checked(fact: Fact, batch: Batch, result: Amended) -> Fact | None:
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
    linked = _linked(_weighed(fact, batch, result), batch, result)
    if fact.replaces is None and fact.same_as is None:  # no link of the model's refused
        linked = ended(linked, batch, result)
    return linked


def _restated(content: str) -> str:
    """A request to remember, as the fact it asks to keep."""
    stripped = _REQUEST.sub("", content, count=1).strip()
    if not stripped or stripped == content.strip():
        return content
    return stripped[:1].upper() + stripped[1:]


# Where a clause starts: the turn's start, or after sentence or clause punctuation.
_CLAUSE_START = re.compile(r"(?:^|[。！？；，、…\n])\s*")


def _whole_clause(content: str, batch: Batch, result: Amended) -> str:
    """A Chinese fact copied from the middle of a clause, completed to the clause's
    start: a small model cuts off the subject, place or time before the verb ("买了套房"
    from "我们在苏州买了套房", "拿到驾照啦" from "我昨天拿到驾照啦"). An English fact
    is left alone: what precedes it is as often another clause ("… and love hiking")."""
    if not evidence.is_cjk(content) or content.lstrip().startswith("我"):
        return content
    copied = re.compile(re.escape(content.strip()), re.IGNORECASE)
    for turn in batch.said:
        match = copied.search(turn)
        if match is None or match.start() == 0:
            continue
        start = max(m.end() for m in _CLAUSE_START.finditer(turn[: match.start()]))
        if not evidence.words(turn[start : match.start()]) - {"我"}:
            return content  # nothing cut off but "I"
        result.changes["clause_completed"] += 1
        return turn[start : match.end()]
    return content


def _about_whom(fact: Fact, batch: Batch, result: Amended) -> Fact:
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
    if person is None or _fills_slot(person, fact, batch):
        return fact
    label = subject_key(person.label())
    key = subject_key(fact.name)
    if label and not key.startswith(label):
        result.changes["third_person_key"] += 1
        fact = fact.model_copy(update={"name": f"{label} {key}".strip()})
    return fact


def _about_someone_else(fact: Fact, batch: Batch) -> bool:
    person = evidence.person_of(fact.content, batch.user_names, batch.known_names)
    return person is not None and not _fills_slot(person, fact, batch)


def _fills_slot(person: evidence.Person, fact: Fact, batch: Batch) -> bool:
    """Whether the person a fact names is the value of one of the user's slots, as the
    rules read it ("男朋友阿杰…": the user's partner is 阿杰), not someone the fact is about."""
    rule = _rule_for(fact, batch)
    return (
        rule is not None
        and slot_name(subject_key(rule.name)) in PERSON_SLOTS
        and bool(person.name)
        and person.name.casefold() == rule_value(rule).casefold()
    )


def _dated(fact: Fact, batch: Batch, result: Amended) -> Fact:
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


def _keyed(fact: Fact, batch: Batch, result: Amended) -> Fact:
    """The rules' slot when they read the same value; else a scope key the content names."""
    rule = _rule_for(fact, batch)
    if (
        rule is not None
        and rule.name
        and subject_key(fact.name) != subject_key(rule.name)
        and not _about_someone_else(fact, batch)
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


def _rule_for(fact: Fact, batch: Batch) -> Fact | None:
    """The rules' fact of the same value: its words all in this fact."""
    mine = evidence.words(fact.content)
    for rule, value in zip(batch.rule_facts, batch.rule_values, strict=True):
        if value and value <= mine:
            return rule
    return None


def _weighed(fact: Fact, batch: Batch, result: Amended) -> Fact:
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


def _linked(fact: Fact, batch: Batch, result: Amended) -> Fact:
    """`replaces` and `same_as` kept only where the memory is about the same subject: the
    same single-valued key, or enough of the same words."""
    update: dict[str, None] = {}
    for link, floor in LINK_OVERLAP.items():
        alias = getattr(fact, link)
        memory = batch.memories.get(alias) if alias is not None else None
        if memory is None:
            continue
        key, theirs_key = subject_key(fact.name), subject_key(memory.name)
        same_key = key == theirs_key or same_words(key, [theirs_key]) is not None
        if (
            key
            and same_key
            and (fact.single or tells_change(fact, batch) or names_old_value(fact, memory, batch))
        ):
            continue  # one value for the key: the new one retires the old, words or not
        theirs = evidence.words(memory.content)
        if theirs and len(theirs & evidence.words(fact.content)) / len(theirs) >= floor:
            continue
        update[link] = None
        result.changes[f"unrelated_{link}"] += 1
    return fact.model_copy(update=update) if update else fact
