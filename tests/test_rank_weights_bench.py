"""bench/rank_weights.py's fit, on questions made for it: its figures rest on hits()
counting a question found when a gold memory is among the first K of the order its
weights give, and on fitted() finding weights that find more when some do."""

from __future__ import annotations

import numpy as np

from bench.rank_weights import HELD, SIGNALS, Asked, K, defaults, fitted, hits


def _question(user: str) -> Asked:
    """K decoys that match a little better, said long ago, and the gold memory said
    today: only a heavier recency finds it."""
    decoy = dict.fromkeys(SIGNALS, 0.0) | {"fused": 0.55, "confidence": 1.0}
    gold = dict.fromkeys(SIGNALS, 0.0) | {"fused": 0.4, "confidence": 1.0, "recency": 1.0}
    rows = [[decoy[s] for s in SIGNALS]] * K + [[gold[s] for s in SIGNALS]]
    return Asked(user, np.array(rows), np.array([False] * K + [True]))


def test_the_fit_finds_the_weights_that_order_the_gold_memory_first() -> None:
    asked = [_question("a"), _question("b")]
    start = defaults()
    assert hits(asked, start) == 0

    weights = fitted(asked, start)

    assert hits(asked, weights) == 2
    recency = SIGNALS.index("recency")
    assert weights[recency] > start[recency]
    held = [SIGNALS.index(s) for s in HELD]
    assert np.array_equal(weights[held], start[held])  # scale and spread as recall gave
