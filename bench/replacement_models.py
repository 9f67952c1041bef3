"""The scripted models of bench/replacement.py: how each names the subject of a fact.

- `same-key`: the offline rules' key every time (a model reusing the keys it is offered);
- `synonym`: the later fact of every subject under another name of it, in other words,
  another word order or Chinese ("home city" -> "city of residence", "居住城市");
- `no-key`: the later facts without any key.
Neither of the last two links a later fact to the memory it replaces in its answer, as
many models do not, so only the fact's key can retire the old value. Their later turns
are said in words the offline rules cannot read (`said_otherwise`), so the rules cannot
name the key for them either. In a follow-up call they link a fact to the memory of the
same subject, as a capable model would.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from typing import Any

from memoryd.extraction import offline
from memoryd.memories.subjects import subject_key
from testkit.fakellm import default_extractor_answer, parse_prompt

OTHERWISE = "Update, words reversed: "

FAVOURITE_WAYS = [
    "{x} i like most",
    "favorite {x}",
    "{x} favourite",
    "most loved {x}",
    "最喜欢的{zh}",
]
CHINESE = {
    "food": "食物",
    "colour": "颜色",
    "band": "乐队",
    "sport": "运动",
    "book": "书",
    "film": "电影",
    "drink": "饮料",
    "season": "季节",
    "game": "游戏",
}
# Other names of each subject the bench's users speak of: 2-5 each, 89 pairs in all, 15
# of them in Chinese.
SYNONYMS: dict[str, list[str]] = {
    "preferred name": ["what to call me", "称呼", "name to use"],
    "home city": ["city of residence", "居住城市", "where i live", "city i live in"],
    **{
        f"favourite {x}": [w.format(x=x, zh=zh) for w in FAVOURITE_WAYS]
        for x, zh in CHINESE.items()
    },
    "employer": ["company", "公司", "company i work for", "current employer"],
    "job title": ["occupation", "职位", "job", "title at work"],
    "manager": ["boss", "直属领导", "line manager", "manager at work"],
    "gym": ["gym i train at", "local gym"],
    "car": ["car i drive", "current car"],
    "phone": ["phone number", "手机号码", "mobile number"],
    "doctor": ["family doctor", "doctor i see"],
    "bank": ["bank i use", "bank account"],
    "team": ["team at work", "current team"],
    "dentist appointment": ["appointment at the dentist", "dentist visit"],
    "next holiday": ["holiday plan", "upcoming holiday"],
    "anniversary dinner": ["dinner for our anniversary", "anniversary meal"],
    "flight home": ["home flight", "flight back home"],
    "yoga class": ["yoga session", "class of yoga"],
    "car service": ["service for the car", "car maintenance"],
}
SUBJECT_OF = {subject_key(name): key for key, names in SYNONYMS.items() for name in [key, *names]}

Responder = Callable[[list[dict[str, Any]]], str]


def synonym_for(key: str, said: str) -> str:
    """Another name of `key`, chosen by what was said (so users vary, runs repeat)."""
    names = SYNONYMS[key]
    return names[zlib.crc32(said.encode()) % len(names)]


def said_otherwise(line: str) -> str:
    """The line in words the offline rules cannot read (the scripted model can)."""
    return OTHERWISE + " ".join(reversed(line.split()))


def _read(content: str) -> str:
    if not content.startswith(OTHERWISE):
        return content
    return " ".join(reversed(content.removeprefix(OTHERWISE).split()))


def renaming(name: Callable[[str, str], str]) -> Responder:
    """The rules' facts of the lines as they were meant; each fact of a line said
    otherwise named `name(key, line)`, linked to nothing; follow-ups answered by subject."""

    def respond(messages: list[dict[str, Any]]) -> str:
        text = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
        if "<facts>\n" in text:
            return _by_subject(text)
        turns, memories = parse_prompt(messages)
        if not any(content.startswith(OTHERWISE) for _role, content in turns):
            return default_extractor_answer(messages)
        meant = [(role, _read(content)) for role, content in turns]
        found = offline.extract_facts(meant, memories)
        facts = [f.model_dump(mode="json", exclude_none=True) for f in found]
        said = " ".join(content for _role, content in meant)
        for fact in facts:
            if fact.get("name") in SYNONYMS:
                fact["name"] = name(fact["name"], said)
            fact["replaces"] = fact["same_as"] = None
        return json.dumps({"facts": facts, "profile_updates": []}, ensure_ascii=False)

    return respond


def _by_subject(text: str) -> str:
    """A follow-up answered as a careful model would: a fact replaces the memory of the
    same subject that says something else, and is the same as one that says the same."""
    block = text.split("<facts>\n", 1)[1].split("\n</facts>", 1)[0]
    facts = [json.loads(line) for line in block.splitlines()]
    _turns, memories = parse_prompt([{"role": "user", "content": text}])
    decisions = []
    for fact in facts:
        subject = SUBJECT_OF.get(subject_key(fact["name"]))
        decision: dict[str, Any] = {"fact": fact["fact"], "replaces": None, "same_as": None}
        for alias, (name, content) in memories.items():
            if subject is None or SUBJECT_OF.get(subject_key(name)) != subject:
                continue
            same = content.casefold() == fact["content"].casefold()
            decision["same_as" if same else "replaces"] = alias
        decisions.append(decision)
    return json.dumps({"decisions": decisions})


def responder(model: str) -> Responder:
    if model == "synonym":
        return renaming(synonym_for)
    if model == "no-key":
        return renaming(lambda _key, _said: "")
    return default_extractor_answer


def later_line(model: str, line: str) -> str:
    """How a user of this bench says a change to the model: as written, or otherwise."""
    return line if model == "same-key" else said_otherwise(line)
