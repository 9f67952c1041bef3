"""Text helpers shared by the stages: normalisation, hashes, trigrams, tokens, secrets."""

from __future__ import annotations

import hashlib
import re
import threading
import unicodedata
from collections import Counter
from functools import lru_cache
from typing import Any

import snowballstemmer  # type: ignore[import-untyped]

_SPACE = re.compile(r"\s+")
_PUNCT_EDGE = re.compile(r"^[\W_]+|[\W_]+$")


def normalize(text: str) -> str:
    """Case-, width- and whitespace-insensitive form used for exact dedup."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _PUNCT_EDGE.sub("", _SPACE.sub(" ", folded).strip())


def content_hash(text: str) -> str:
    return hashlib.sha256(normalize(text).encode()).hexdigest()


def trigrams(text: str) -> set[str]:
    """Character trigrams of the normalised text; work for unsegmented scripts (Chinese)."""
    norm = f"  {normalize(text)} "
    return {norm[i : i + 3] for i in range(len(norm) - 2)}


def words(text: str) -> list[str]:
    """The text's words (runs of letters and digits), width- and case-folded."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def word_trigrams(text: str) -> set[str]:
    """Trigrams of each word padded as pg_trgm pads them ("  c", " co", …, "ee "), so
    the Python and PostgreSQL similarities agree on what a match is."""
    return set().union(*map(_padded_trigrams, words(text)))


@lru_cache(maxsize=65536)
def _padded_trigrams(word: str) -> frozenset[str]:
    """Cached: recall scores a scope's memories per query, and words recur."""
    padded = f"  {word} "
    return frozenset(padded[i : i + 3] for i in range(len(padded) - 2))


def similarity(a: str, b: str) -> float:
    """Jaccard similarity of character trigrams, 0..1."""
    ta, tb = trigrams(a), trigrams(b)
    if not ta or not tb:
        return 0.0
    return len(ta & tb) / len(ta | tb)


def _is_wide(ch: str) -> bool:
    return unicodedata.east_asian_width(ch) in ("W", "F")


# What a tokenizer never merges: a word, up to three digits, one punctuation mark.
_PIECE = re.compile(r"[A-Za-z]+|\d{1,3}|[^\w\s]")


def estimate_tokens(text: str) -> int:
    """Local token estimate (no tokenizer download), on the safe side: ~4 chars per
    token, 1 per CJK char, and at least one per piece a tokenizer keeps apart (prices,
    dates and lists of numbers cost a token per three digits and per mark)."""
    pieces = len(_PIECE.findall(text))
    if text.isascii():  # the common case, on the ingest hot path: nothing is wide
        return max((len(text) + 3) // 4, pieces)
    wide = sum(1 for ch in text if _is_wide(ch))
    return wide + max((len(text) - wide + 3) // 4, pieces)


# Han, Hiragana, Katakana, Hangul: scripts written without spaces between words.
_UNSEGMENTED = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_WORD = re.compile(r"[^\W_]+")
MAX_QUERY_TOKENS = 256  # a pasted dialogue as the query keeps most of its words
MAX_QUERY_CHARS = 4000  # of a query read for its terms (and its last line)
MAX_TERM_CHARS = 64  # longer "words" (hashes, base64) are cut: the index column is bounded

# Words that carry no meaning of their own. A question is mostly made of them ("what did
# the user say about ..."), so they would otherwise outweigh the one word that matters.
STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been
    before being below between both but by can could did do does doing down during each
    few for from further had has have having he her here hers herself him himself his how
    i if in into is it its itself just me more most my myself no nor not now of off on
    once only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves s t ll d re ve m don doesn didn isn aren
    wasn weren won wouldn couldn shouldn tell know remember user users""".split()  # noqa: SIM905
)
# Single characters of unsegmented scripts that are grammar or too common to tell
# memories apart (的 了 吗 我 …); the character pairs they are part of are still terms.
STOP_CHARS = frozenset(
    "的了吗呢吧啊呀是我你他她它们在和也就都有这那个么什怎一不上下中为之于人以会但做去又"
    "地多大天好如对得想把时最来没然用看着知老能要说过还里"
)


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """English stem ("preferences" -> "prefer"); other Latin-script words pass through
    the same rules, which only ever shorten them consistently."""
    return str(_stemmer().stemWord(word))


# A snowball stemmer keeps the word it works on in the object itself, so threads sharing
# one read each other's words (wrong terms, IndexError). One per thread; under gevent's
# patched threading, one per greenlet; prefork workers are separate processes.
_local = threading.local()


def _stemmer() -> Any:
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = snowballstemmer.stemmer("english")
    return stemmer


def search_tokens(text: str) -> list[str]:
    """Index terms in order, repeats kept: stemmed words without stop words, and for
    unsegmented scripts every content character and every pair of neighbouring
    characters (so 2-character Chinese words match). Only letters and digits survive, so
    no token can carry query syntax."""
    tokens: list[str] = []

    def add_word(word: str) -> None:
        if word not in STOP_WORDS:
            tokens.append(stem(word[:MAX_TERM_CHARS]))

    for word in words(text):
        last = 0
        for run in _UNSEGMENTED.finditer(word):
            if run.start() > last:
                add_word(word[last : run.start()])
            chars = run.group()
            tokens.extend(ch for ch in chars if ch not in STOP_CHARS)
            tokens.extend(chars[i : i + 2] for i in range(len(chars) - 1))
            last = run.end()
        if last < len(word):
            add_word(word[last:])
    return tokens


def search_text(text: str) -> str:
    """What the keyword index stores for a memory: its terms, space separated, repeats
    kept (term frequency and document length are part of BM25)."""
    return " ".join(search_tokens(text))


# The words people ask about a slot with, indexed with every memory of that key: "where
# does Ali live now?" finds "Moved to Lisbon" (key "home city") by "live".
SLOT_WORDS = {
    "home city": "live lives where 住 住在 哪里",
    "preferred name": "call called name 叫 称呼",
    "name": "called name 名字",
    "employer": "work works company job 工作 公司",
    "job title": "work job role 工作 职位",
    "diet": "eat eats food 吃",
    "partner": "partner 对象",
}


def memory_search_text(name: str, content: str) -> str:
    """What the keyword index stores for a memory of this name (key) and content."""
    slot = SLOT_WORDS.get(" ".join(name.casefold().split()), "")
    return search_text(f"{name} {slot} {content}" if slot else f"{name} {content}")


def query_tokens(query: str) -> list[str]:
    """Distinct search terms of a user query, at most MAX_QUERY_TOKENS: a dialogue's last
    line's first, then the longest (query_term_counts)."""
    return list(query_term_counts(query))


def mostly_latin(text: str) -> bool:
    """Whether half or more of the text's letters are Latin ones, what a model trained
    on English reads (a text of no letters counts as Latin)."""
    letters = [ch for ch in text if ch.isalpha()]
    latin = sum(ch < "\u0250" or "\u1e00" <= ch <= "\u1eff" for ch in letters)
    return latin * 2 >= len(letters)


def last_line(query: str) -> str | None:
    """The last non-blank line of a question of several (a dialogue's latest turn), else
    None. Lines end at newlines only: a form feed or a Unicode line separator does not
    make a question a dialogue."""
    lines = [line for line in (part.strip() for part in query.split("\n")) if line]
    return lines[-1] if len(lines) > 1 else None


def last_line_terms(query: str) -> frozenset[str]:
    """The search terms of a dialogue's last line (last_line); none for one line."""
    return frozenset(_last_line_tokens(query))


def _last_line_tokens(query: str) -> list[str]:
    last = last_line(query)
    return search_tokens(last[:MAX_QUERY_CHARS]) if last else []


def query_term_counts(query: str) -> dict[str, int]:
    """query_tokens, each with how many times the query says it. A long query is read to
    MAX_QUERY_CHARS, and a dialogue's last line, what the answer speaks to, wherever it
    is; past MAX_QUERY_TOKENS that line's terms are kept first, then the longest."""
    tokens = search_tokens(query[:MAX_QUERY_CHARS])
    last = _last_line_tokens(query)
    if len(query.rstrip()) > MAX_QUERY_CHARS:  # the last line was cut off
        tokens += last
    counts = Counter(t for t in tokens if t)
    latest = frozenset(last)
    kept = sorted(counts, key=lambda t: (t in latest, len(t)), reverse=True)
    return {t: counts[t] for t in kept[:MAX_QUERY_TOKENS]}


def content_words(text: str) -> str:
    """The text without stop words, for character-trigram similarity: "what does she
    drink" compares as "drink", so a question's grammar does not dilute the match."""
    return " ".join(w for w in words(text) if w not in STOP_WORDS)


# People in a user's life, as a sentence names them before saying something about them.
RELATIONS_EN = (
    "sister|brother|mother|mom|mum|father|dad|wife|husband|partner|girlfriend|boyfriend|"
    "son|daughter|friend|colleague|coworker|boss|manager|neighbour|neighbor|roommate|"
    "cousin|aunt|uncle|grandmother|grandma|grandfather|grandpa|team lead|teammate"
)
RELATIONS_ZH = (
    "妹妹|姐姐|哥哥|弟弟|妈妈|母亲|爸爸|父亲|老婆|老公|妻子|丈夫|太太|先生|女朋友|男朋友|"
    "儿子|女儿|朋友|同事|老板|经理|领导|邻居|室友|表姐|表妹|表哥|表弟|奶奶|爷爷|外婆|外公|组长"
)


# ------------------------------------------------------------------------------ secrets

_SECRET_PATTERNS = [
    re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"),  # OpenAI-style keys
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key id
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"),  # GitHub tokens
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),  # Slack tokens
    re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),  # JWT
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(
        r"(password|passwd|passcode|pwd|api[ _-]?key|secret|token|card number|\bcvv"
        r"|密码|口令|密钥|卡号|银行卡)"
        r"\s*(is|=|:|：|是)\s*\S+",
        re.IGNORECASE,
    ),
]
_CARD_CANDIDATE = re.compile(r"\b(?:\d[ -]?){13,19}\b")


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def holds_secret(text: str) -> bool:
    """API keys, tokens, passwords and card numbers never become memories."""
    if any(p.search(text) for p in _SECRET_PATTERNS):
        return True
    for match in _CARD_CANDIDATE.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if 13 <= len(digits) <= 19 and _luhn_ok(digits):
            return True
    return False
