"""What the turns say for a proposed fact: how much of it the user said, in which
sentence, and whose the sentence is (the user's, or a person in the user's life).

Word overlap, not meaning: a fact is written in the user's language from the user's own
words, so its salient words are in the turns that told it. A fact whose words the user
never said, or that names a person only the memories shown mention, was not said.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from memoryd.text import RELATIONS_EN, RELATIONS_ZH

_LATIN = re.compile(r"[A-Za-z][A-Za-z'\-]*|\d+")
_CJK_RUN = re.compile(r"[\u3400-\u9fff]+")
_SENTENCE = re.compile(r"[^.!?。！？;；\n]+[.!?。！？;；]?")
_STOP_WORDS = """the and but for are was were has have had not with this that from into
about your you user user's she her his him they them their our its it's i'm i've i'd
i'll let's will would could should can just also very really then than there here what when where
who which how want wants like likes please remember note now lives live living works work
working moved started since again still currently new week weeks month months year years
day days turn"""
_STOP = frozenset(_STOP_WORDS.split())
_CJK_STOP = frozenset("的了是在我你他她它们这那有和就也都很会要说吗呢吧啊")

_OTHER_EN = re.compile(
    rf"^\s*(?:(?:the user's|user's|my|our|his|her)\s+)?(?:best\s+|older\s+|younger\s+|little\s+|"
    rf"big\s+|new\s+)?(?P<rel>{RELATIONS_EN})(?:'s)?\b(?:,?\s+(?P<name>(?-i:[A-Z][a-z]+)))?",
    re.IGNORECASE,
)
_OTHER_ZH = re.compile(
    rf"^\s*(?:用户的?|我们?的?)?(?P<rel>{RELATIONS_ZH})(?P<name>(?:(?![是叫])[\u4e00-\u9fff]){{0,2}})"
)
_NAME_FIRST = re.compile(r"^\s*(?P<name>[A-Z][a-z]{1,20})\b")


def words(text: str) -> set[str]:
    """Salient words: Latin words of three letters or more (their first five letters, so
    "moved" meets "move"), numbers, and Chinese character pairs."""
    found = set()
    for word in _LATIN.findall(text):
        lower = word.lower()
        if (len(lower) >= 3 or lower.isdigit()) and lower not in _STOP:
            found.add(lower[:5])
    for run in _CJK_RUN.findall(text):
        chars = [c for c in run if c not in _CJK_STOP] or list(run)
        found.update(a + b for a, b in pairwise(chars))
        if len(chars) == 1:
            found.add(chars[0])
    return found


def support(fact: str, said: Iterable[str]) -> float | None:
    """The part of the fact's salient words found in `said`; None when the fact has none
    or is written in another script than what was said (a translation: not measurable)."""
    mine = {w for w in words(fact) if not w.isdigit()}  # dates the pipeline wrote count not
    if not mine:
        return None
    theirs: set[str] = set()
    texts = list(said)
    for text in texts:
        theirs |= words(text)
    if is_cjk(fact) != any(is_cjk(t) for t in texts):
        return None
    return len(mine & theirs) / len(mine)


def is_cjk(text: str) -> bool:
    return bool(_CJK_RUN.search(text))


def sentences(texts: Sequence[str]) -> list[str]:
    return [s.strip() for t in texts for s in _SENTENCE.findall(t) if s.strip()]


def best_sentence(fact: str, said: Sequence[str]) -> str | None:
    """The sentence of `said` sharing most salient words with the fact (None: none shares)."""
    mine = words(fact)
    scored = [(len(mine & words(s)), s) for s in sentences(said)]
    best = max(scored, default=(0, ""), key=lambda pair: pair[0])
    return best[1] if best[0] > 0 else None


@dataclass(frozen=True)
class Person:
    """Someone a sentence or fact is about who is not the user."""

    relation: str  # "sister", "妹妹", or "" when only a name is given
    name: str

    def label(self) -> str:
        return " ".join(p for p in (self.relation, self.name) if p)


def person_of(sentence: str, user_names: set[str], known_names: set[str]) -> Person | None:
    """Whom a sentence (or a fact) is about when it is not the user: "My sister Anna …",
    "我妹妹…", or a name the turns or memories use for someone else ("Tom moved …")."""
    for pattern in (_OTHER_EN, _OTHER_ZH):
        if match := pattern.match(sentence):
            if _NAMING.match(sentence[match.end() :]):
                return None  # "My team lead is Karen": who fills the user's slot
            relation = match.group("rel")
            return Person(relation.lower() if relation.isascii() else relation, match["name"] or "")
    match = _NAME_FIRST.match(sentence)
    if match and match["name"].lower() in known_names and match["name"].lower() not in user_names:
        return Person("", match["name"])
    return None


_NAMING = re.compile(r"\s*(?:is|was|are|=|:|是|叫)\s*", re.IGNORECASE)
_PERSON_NAMED = re.compile(
    rf"\b(?:{RELATIONS_EN})(?:,)?\s+(?P<a>(?-i:[A-Z][a-z]{{1,20}}))\b"
    r"|\b(?P<b>(?-i:[A-Z][a-z]{1,20}))(?:'s\s+\w+|\s+(?:lives|lived|works|worked|moved|said|told|wants"
    r"|loves|likes|has a|is my))\b",
    re.IGNORECASE,
)


def person_names(texts: Sequence[str]) -> set[str]:
    """Names the texts give people, lower-cased: after a relation ("my sister Anna"), or
    before what people do ("Tom moved", "Tom's car"); a place ("Leeds is …") is none."""
    found = set()
    for text in texts:
        for match in _PERSON_NAMED.finditer(text):
            name = match["a"] or match["b"]
            if name[0].isupper():
                found.add(name.lower())
    return found - _STOP


def mentions(text: str, person: Person) -> bool:
    lower = text.lower()
    return any(part and part.lower() in lower for part in (person.relation, person.name))


def capitalised(texts: Iterable[str]) -> set[str]:
    """Words written with a capital inside a sentence, lower-cased: the names used."""
    found: set[str] = set()
    for sentence in sentences(list(texts)):
        for word in re.findall(r"(?<=\s)[A-Z][a-z]{1,20}\b", sentence):
            found.add(word.lower())
    return found


_SUBJECT_NAME = re.compile(
    r"^\s*(?P<name>[A-Z][a-z]{1,20})(?:'s\b|\s+(?:is|was|has|had|lives|lived|works|worked|moved|"
    r"likes|loves|prefers|said|wants|will|can)\b)"
)


def names_in(texts: Sequence[str]) -> set[str]:
    """Names the texts use, lower-cased: capitalised inside a sentence ("Sister Anna"), or
    at its start when a verb follows ("Tom moved …", "Tom's …")."""
    found = capitalised(texts)
    for sentence in sentences(list(texts)):
        if match := _SUBJECT_NAME.match(sentence):
            found.add(match["name"].lower())
    return found - _STOP


def borrowed_names(
    fact: str, said: Sequence[str], shown: Sequence[str], examples: Collection[str] = ()
) -> set[str]:
    """Names in the fact that nobody said in these turns but a memory shown uses, or the
    prompt's examples: the model took them from there ("<someone> moved to Porto")."""
    heard = set(re.findall(r"[a-z]+", " ".join(said).lower()))
    names = {m.lower() for m in re.findall(r"\b[A-Z][a-z]{1,20}\b", fact)}
    return (names & (names_in(shown) | set(examples))) - heard
