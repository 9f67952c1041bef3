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
    wide = sum(1 for ch in text if _is_wide(ch))
    return wide + (len(text) - wide + 3) // 4
