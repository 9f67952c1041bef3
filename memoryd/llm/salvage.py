"""What can be kept of a JSON answer cut off at max_tokens.

A small model sometimes repeats itself until the token limit stops it ("the same fact,
the same fact, ..."): its answer ends mid-string. Every item it completed before the
cut is as good as in a whole answer, and asking again costs another 30-60 s of a slow
model, often to loop again. The answer up to its last complete object, with the
brackets still open closed, is parsed instead; the schema then checks it as any other.
"""

from __future__ import annotations

import json
from typing import Any

CLOSERS = {"{": "}", "[": "]"}
TRIES = 50  # complete objects tried from the end: a later one that fails, an earlier one


def complete_prefix(text: str) -> Any | None:
    """The JSON value of `text` cut after its last complete object, or None."""
    cuts: list[tuple[int, str]] = []  # (end of an object, the closers it then needs)
    stack: list[str] = []
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in CLOSERS:
            stack.append(CLOSERS[ch])
        elif ch in "}]" and stack:
            stack.pop()
            if ch == "}" and stack:
                cuts.append((i + 1, "".join(reversed(stack))))
    for end, closers in reversed(cuts[-TRIES:]):
        try:
            return json.loads(text[:end] + closers)
        except ValueError:
            continue
    return None
