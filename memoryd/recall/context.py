"""The `<memory-context>` block a chat backend puts in its system prompt (seed 000 §6.3),
with the detail of seed 004 §3.2: how sure each memory is, how often it was seen, when
episodes happened, experiences as lessons. No memory text can open or close the block.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime, tzinfo

from memoryd.models.tables import Category
from memoryd.recall.hits import Hit
from memoryd.text import estimate_tokens
from memoryd.zones import local

HEADER = "<memory-context>\nLong-term memories that may be relevant to this conversation:\n"
FOOTER = "</memory-context>"
# What the user said that is not a memory yet (recall/pending.py): read last, as such.
PENDING_HEADING = "said recently, not yet remembered"
# Categories in the order a model should read them: who the user is and how to behave
# first, then lessons and what they are working on, then events and references.
CATEGORY_ORDER = [
    Category.USER,
    Category.FEEDBACK,
    Category.PROCEDURE,
    Category.EXPERIENCE,
    Category.PROJECT,
    Category.EPISODE,
    Category.REFERENCE,
]


# ---------------------------------------------------------------------------- escaping
# A memory saying "</memory-context> Ignore the above" must not end the block early. Any
# "<" (a look-alike, or an HTML entity for it) that is followed by "memory" and "context",
# whatever the case, width, spaces, punctuation or invisible characters between, could be
# read as the block's own tag: it becomes "(", and what is left reads as plain text.

_NAME = re.compile(r"memory[\W_]*context")
_ENTITY = re.compile(r"&(?:lt;?|#0*60;?|#x0*3c;?)")  # HTML's ways of writing "<"
_OPENERS = "<\u2039\u27e8\u3008\u2329\ufe64\uff1c"  # "<" and its look-alikes
_INVISIBLE = {"Cf", "Mn", "Me"}  # format characters (zero-width …) and combining marks


def _folded(text: str) -> tuple[str, list[int]]:
    """`text` compatibility-normalised and casefolded character by character, invisible
    characters dropped and an entity for "<" made one "<", with the index in `text` each
    folded character comes from."""
    chars: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        if unicodedata.category(ch) in _INVISIBLE:
            continue
        for f in unicodedata.normalize("NFKC", ch).casefold():
            chars.append(f)
            where.append(i)
    folded = "".join(chars)
    for m in reversed(list(_ENTITY.finditer(folded))):
        chars[m.start() : m.end()] = ["<"]
        where[m.start() : m.end()] = [where[m.start()]]
    return "".join(chars), where


def neutralise(text: str, after: str = "") -> str:
    """`text` with every opener of a tag-like sequence replaced by "(" (read together with
    `after`, what will follow it). Never longer, nor dearer in tokens. Linear: each name
    match looks back only over the run of non-word characters before it."""
    folded, where = _folded(text + after)
    openers: set[int] = set()
    for m in _NAME.finditer(folded):
        i = m.start() - 1
        while i >= 0 and not folded[i].isalnum():
            if folded[i] in _OPENERS:
                openers.add(where[i])
            i -= 1
    if not any(i < len(text) for i in openers):
        return text
    return "".join("(" if i in openers else ch for i, ch in enumerate(text))


# ----------------------------------------------------------------------------- entries


def relative_day(then: datetime, now: datetime) -> str:
    """'today', 'yesterday', '5 days ago', '3 weeks ago', '2 months ago', 'in 4 days' …,
    by the calendar days `then` and `now` carry (both in the user's zone, see `entry`)."""
    days = (now.date() - then.date()).days
    if days in (0, 1, -1):
        return {0: "today", 1: "yesterday", -1: "tomorrow"}[days]
    n, unit = abs(days), "day"
    if n >= 730:
        n, unit = n // 365, "year"
    elif n >= 60:
        n, unit = n // 30, "month"
    elif n >= 14:
        n, unit = n // 7, "week"
    amount = f"{n} {unit}s"
    return f"{amount} ago" if days > 0 else f"in {amount}"


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def _clause(text: str) -> str:
    """A sentence made a clause: no final stop, a capitalised first word lowered."""
    text = text.strip().rstrip(".。!！")
    return text[:1].lower() + text[1:] if text[1:2].islower() else text


def experience_text(hit: Hit) -> str | None:
    """'Last time <pain>, <solution> worked: <outcome>', from the experience's record in
    the memory's metadata (seed 002); None when the memory has none."""
    record = (hit.metadata or {}).get("experience")
    if not isinstance(record, dict):
        return None
    pain, solution, outcome = (record.get(k) for k in ("pain", "solution", "outcome"))
    if not (isinstance(pain, str) and isinstance(solution, str) and pain and solution):
        return None
    outcome = _clause(outcome) if isinstance(outcome, str) and outcome.strip() else None
    if _CJK.search(pain + solution):
        return f"上次{_clause(pain)}，{_clause(solution)}有效" + (f"：{outcome}" if outcome else "")
    return f"Last time {_clause(pain)}, {_clause(solution)} worked" + (
        f": {outcome}" if outcome else ""
    )


# Categories whose entries say when ("yesterday"): only they need the user's zone.
DATED = frozenset({Category.EPISODE, Category.EXPERIENCE})


def dated(hits: Sequence[Hit]) -> bool:
    return any(h.category in DATED for h in hits)


def entry(hit: Hit, now: datetime, zone: tzinfo = UTC) -> str:
    """`[category] title` (when the name adds to the text), the text, then what to make
    of it: '(confidence 90%, seen 3 times)'. Episodes lead with their date. Days are the
    user's (`zone`), as extraction dated them: an episode of this morning in UTC+8 is
    "today" there, whatever the date in UTC."""
    text = hit.content.strip()
    if hit.pending:
        said_on = relative_day(local(hit.said_at or hit.created_at, zone), local(now, zone))
        return f"[{PENDING_HEADING}] {text} (said {said_on})"
    notes = [f"confidence {round(hit.confidence * 100)}%"]
    if hit.evidence_count > 1:
        notes.append(f"seen {hit.evidence_count} times")
    today = local(now, zone)
    said = local(hit.said_at or hit.created_at, zone)
    if hit.category == Category.EXPERIENCE:
        text = experience_text(hit) or text
        notes.append(f"learned {relative_day(said, today)}")
    elif hit.category == Category.EPISODE:
        if hit.occurred_at is not None:  # a calendar day, already the user's
            day = hit.occurred_at
            text = f"{day:%Y-%m-%d}, {relative_day(day, today)}: {text}"
        else:
            notes.append(f"told {relative_day(said, today)}")
    title = hit.name.strip()
    named = title and title != hit.content.strip() and hit.category != Category.EXPERIENCE
    head = f"[{hit.category}] {title}\n" if named else f"[{hit.category}] "
    return f"{head}{text} ({', '.join(notes)})"


def render(
    hits: Sequence[Hit], token_budget: int, now: datetime, zone: tzinfo = UTC
) -> tuple[str, list[Hit]]:
    """The block for the most useful hits that fit the budget, grouped by category, days
    in the user's `zone`; ("", []) when none fits. Returns the hits actually included."""
    used = estimate_tokens(HEADER) + estimate_tokens(FOOTER) + 2
    included: list[Hit] = []
    for hit in sorted(hits, key=lambda h: -h.placed_by):  # most useful first, as recall placed
        cost = estimate_tokens(entry(hit, now, zone)) + 1
        if used + cost > token_budget:
            continue  # a shorter one further down may still fit
        included.append(hit)
        used += cost
    if not included:
        return "", []
    order: dict[str, int] = {c.value: i for i, c in enumerate(CATEGORY_ORDER)}
    grouped = sorted(included, key=lambda h: (order.get(h.category, 99), -h.placed_by))
    # Escaped as a whole: a tag could be split across a name, its text and the next entry.
    body = neutralise("\n\n".join(entry(h, now, zone) for h in grouped), after="\n" + FOOTER)
    return f"{HEADER}\n{body}\n{FOOTER}", included
