"""A ranked list spread over the conversations it draws on.

The memories of one conversation often match a question alike: a trip planned in one
chat leaves its flights, hotel, budget and route, each a memory with the same words.
Ranked by score alone they fill the head, and the conversation the question is about,
if it is another, falls below it. Each memory gives up `share` of its score for every
memory of its conversation already placed above it: the best of a conversation keeps
its place, the others wait behind the best of other conversations unless they match
clearly better. A conversation is told by when its memories were said: a batch's
memories share the time of its newest turn, and memories said at most CONVERSATION_GAP
apart are taken as one conversation. The score each hit shows is its
own; `parts.spread` shows what it gave up.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

from memoryd.recall.search import Scored

# A chat idle this long is most often over: the next message starts another one.
CONVERSATION_GAP = timedelta(minutes=30)


def spread_by_conversation(top: Scored, rows: Mapping[int, Any], share: float, head: int) -> Scored:
    """`top` (best first) with its first `head` places taken greedily by score less
    `share` for each memory of the same conversation placed before; the rest as it was.
    `rows` are the candidates' SCORING_COLUMNS, said_at among them."""
    if share <= 0 or len(top) < 2:
        return top
    talks = conversations([rows[mid].said_at for _score, mid, _signals in top])
    if len(set(talks)) < 2:  # one conversation: every place gives up alike
        return top
    # (-score after what it gives up, -id, its conversation's count when scored, index):
    # the order of `top` itself (best score, then newest id) when nothing is given up.
    heap = [(-score, -mid, 0, n) for n, (score, mid, _signals) in enumerate(top)]
    heapq.heapify(heap)
    placed: Counter[int] = Counter()
    spread: Scored = []
    while heap and len(spread) < head:
        _, neg_mid, counted, n = heapq.heappop(heap)
        talk = talks[n]
        if counted != placed[talk]:  # one of its conversation was placed since: score again
            placed_by = round(top[n][0] - share * placed[talk], 6)  # as scores are rounded
            heapq.heappush(heap, (-placed_by, neg_mid, placed[talk], n))
            continue
        score, mid, signals = top[n]
        if counted:
            signals["spread"] = round(share * counted, 6)
        placed[talk] += 1
        spread.append((score, mid, signals))
    taken = {mid for _score, mid, _signals in spread}
    return spread + [item for item in top if item[1] not in taken]


def conversations(said: Sequence[datetime]) -> list[int]:
    """A conversation number for each time: times at most CONVERSATION_GAP after the
    one before them, in time order, share one."""
    order = sorted(range(len(said)), key=said.__getitem__)
    numbers = [0] * len(said)
    for before, after in pairwise(order):
        numbers[after] = numbers[before] + (said[after] - said[before] > CONVERSATION_GAP)
    return numbers
