"""The `<memory-context>` block a chat backend puts in its system prompt (seed 000 §6.3)."""

from __future__ import annotations

from collections.abc import Sequence

from memoryd.models.tables import Category
from memoryd.recall.rank import Hit
from memoryd.text import estimate_tokens

HEADER = "<memory-context>\nLong-term memories that may be relevant to this conversation:\n"
FOOTER = "</memory-context>"
# Categories in the order a model should read them: who the user is and how to behave
# first, then what they are working on, then events and references.
CATEGORY_ORDER = [
    Category.USER,
    Category.FEEDBACK,
    Category.PROCEDURE,
    Category.PROJECT,
    Category.EPISODE,
    Category.REFERENCE,
]


def entry(hit: Hit) -> str:
    title = hit.name.strip()
    if not title or title == hit.content.strip():
        return f"[{hit.category}] {hit.content}"
    return f"[{hit.category}] {title}\n{hit.content}"


def render(hits: Sequence[Hit], token_budget: int) -> tuple[str, list[Hit]]:
    """The block for the most useful hits that fit the budget, grouped by category;
    ("", []) when none fits. Returns the hits actually included."""
    used = estimate_tokens(HEADER) + estimate_tokens(FOOTER) + 2
    included: list[Hit] = []
    for hit in sorted(hits, key=lambda h: -h.score):  # most useful first
        cost = estimate_tokens(entry(hit)) + 1
        if used + cost > token_budget:
            continue  # a shorter one further down may still fit
        included.append(hit)
        used += cost
    if not included:
        return "", []
    order = {c: i for i, c in enumerate(CATEGORY_ORDER)}
    grouped = sorted(included, key=lambda h: (order.get(Category(h.category), 99), -h.score))
    body = "\n\n".join(entry(h) for h in grouped)
    return f"{HEADER}\n{body}\n{FOOTER}", included
