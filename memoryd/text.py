"""Text helpers shared by ingest, dedup and ranking: normalisation, hashes, trigrams, tokens."""

from __future__ import annotations

import hashlib
import re
import unicodedata

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


def similarity(a: str, b: str) -> float:
    """Jaccard similarity of character trigrams, 0..1."""
    ta, tb = trigrams(a), trigrams(b)
    if not ta or not tb:
        return 0.0
    return len(ta & tb) / len(ta | tb)


def _is_wide(ch: str) -> bool:
    return unicodedata.east_asian_width(ch) in ("W", "F")


def estimate_tokens(text: str) -> int:
    """Local token estimate (no tokenizer download): ~4 chars per token, 1 per CJK char."""
    if text.isascii():  # the common case, on the ingest hot path: nothing is wide
        return (len(text) + 3) // 4
    wide = sum(1 for ch in text if _is_wide(ch))
    return wide + (len(text) - wide + 3) // 4


# Han, Hiragana, Katakana, Hangul: scripts written without spaces between words.
_UNSEGMENTED = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_WORD = re.compile(r"[^\W_]+")
MAX_QUERY_TOKENS = 32


def search_tokens(text: str) -> list[str]:
    """Index terms: lowercase words, and for unsegmented scripts every character and every
    pair of neighbouring characters (so 2-character Chinese words match). Only letters and
    digits survive, so no token can carry query syntax."""
    tokens: list[str] = []
    for word in _WORD.findall(unicodedata.normalize("NFKC", text).casefold()):
        last = 0
        for run in _UNSEGMENTED.finditer(word):
            if run.start() > last:
                tokens.append(word[last : run.start()])
            chars = run.group()
            tokens.extend(chars)
            tokens.extend(chars[i : i + 2] for i in range(len(chars) - 1))
            last = run.end()
        if last < len(word):
            tokens.append(word[last:])
    return tokens


def search_text(text: str) -> str:
    """What the keyword index stores for a memory (its content and name)."""
    return " ".join(dict.fromkeys(search_tokens(text)))


def query_tokens(query: str) -> list[str]:
    """Distinct search terms of a user query, longest first, at most MAX_QUERY_TOKENS."""
    unique = dict.fromkeys(t for t in search_tokens(query[:4000]) if t)
    return sorted(unique, key=len, reverse=True)[:MAX_QUERY_TOKENS]
