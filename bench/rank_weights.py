"""Would weights learned from data rank better than recall's? Recall re-scores its fused
candidates by a weighed sum of signals (rank.py, RecallSettings.rank_weight_*); this
bench fits those weights to the public datasets and scores them on users the fit did
not see.

Protocol: bench/quality.py's replay on SQLite (each user's facts remembered in time
order, each question recalled where the data asks it), without and with the local
model. Before each question's recall, a read-only rank.recall keeps its first
CANDIDATES memories with their signals (ScoreParts), as that recall meets them. A question's
candidates are then ordered again by a weighed sum of those signals, the fused lists'
weight held at 1 and the conversation spread as recall gave it; the weights, started at
the defaults (0 for the signals recall does not weigh alone: the cosine, the trigram
similarity, the BM25 score over the question's best), are fitted by coordinate ascent on
hit@5 over the training users' questions. Held out: RealMem's five users that
bench/quality.py asks, trained on the other five; each MADial user in turn, trained on
the other. A fit can only reorder what the defaults placed in the first CANDIDATES.

    .venv/bin/python bench/rank_weights.py [--datasets realmem,madial_zh,madial_en]
        [--no-local]

Per dataset and configuration, over the held-out users' questions (RealMem's five,
MADial's all): hit@5 with the defaults and with the weights fitted without them; with
the weights fitted on RealMem's training users (recall has one set of weights for every
user); and with weights fitted to those very questions (in-sample, what this fit reaches
knowing the answers); and the weights fitted without the held-out users (RealMem's;
MADial's last fold's). One JSON line at the end.
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from numpy.typing import NDArray

from bench.common import emit
from bench.quality_memoryd import AGENT, ReplayStore
from bench.quality_plan import DATASETS, REALMEM_USERS, Question, make_plan

CANDIDATES = 50
K = 5
# The signals of a candidate (ScoreParts' names; "bm25" over the question's best).
SIGNALS = (
    "fused",
    "strength",
    "recency",
    "confidence",
    "key",
    "intent",
    "embedding",
    "similarity",
    "bm25",
    "spread",
)
HELD = ("fused", "spread")  # the scale and the spread's order stay as recall gave them
STEPS = (-0.2, -0.1, -0.05, -0.02, 0.02, 0.05, 0.1, 0.2)
ROUNDS = 3


class Asked(NamedTuple):
    """One question's candidates: their signals (a row each) and which are gold."""

    user: str
    signals: NDArray[np.float64]
    gold: NDArray[np.bool_]


class RecordingStore(ReplayStore):
    """bench/quality.py's replay, each question's candidates kept as its recall meets
    them: after the scope's new memories are embedded, before the recall reinforces
    what it returns."""

    def __init__(self, stack: ExitStack, database: str, local: bool) -> None:
        super().__init__(stack, database, local)
        self.asked: list[Asked] = []

    def _recall(self, user: str, question: Question, index: int, got: dict[str, Any]) -> None:
        from memoryd.models.keys import Scope

        self._fill(Scope(AGENT, user))
        self.asked.append(self._candidates(user, question))
        super()._recall(user, question, index, got)

    def _candidates(self, user: str, question: Question) -> Asked:
        from memoryd.models.db import session_scope, utcnow
        from memoryd.models.keys import Scope
        from memoryd.recall import embeddings
        from memoryd.recall.rank import recall

        settings, query = self.settings, question.query
        vector = embeddings.embed_query(settings, query, stress_last_line=True)
        with session_scope(settings.storage, readonly=True) as session:
            scope, now = Scope(AGENT, user), utcnow()
            hits = recall(
                session, settings, scope, query, k=CANDIDATES, now=now,
                query_vector=vector, stress_last_line=True,
            )  # fmt: skip
        parts = [hit.parts.model_dump() for hit in hits]
        best = max([p["bm25"] or 0.0 for p in parts] + [1e-9])
        rows = [[(p[s] or 0.0) / (best if s == "bm25" else 1.0) for s in SIGNALS] for p in parts]
        gold = [bool(question.gold & self.sources.get(hit.id, set())) for hit in hits]
        signals = np.array(rows, dtype=float).reshape(len(rows), len(SIGNALS))
        return Asked(user, signals, np.array(gold, dtype=bool))


def recorded(name: str, local: bool) -> list[Asked]:
    """Every question of dataset `name` (RealMem's ten users), with its candidates."""
    from memoryd.models.db import dispose_engines

    with ExitStack() as stack:
        store = RecordingStore(stack, "sqlite", local)
        store.ask(make_plan(name, None, None))
        dispose_engines()
    return store.asked


def defaults() -> NDArray[np.float64]:
    """Recall's weights, in SIGNALS' order: 0 for the signals it does not weigh alone."""
    from memoryd.settings import Settings

    recall = Settings().recall
    weights = dict.fromkeys(SIGNALS, 0.0) | {
        "fused": recall.rank_weight_match,
        "strength": recall.rank_weight_strength,
        "recency": recall.rank_weight_recency,
        "confidence": recall.rank_weight_confidence,
        "key": recall.rank_weight_key,
        "intent": recall.rank_weight_intent,
        "spread": -1.0,  # what spread.py took off, as it took it
    }
    return np.array([weights[s] for s in SIGNALS])


def hits(asked: list[Asked], weights: NDArray[np.float64]) -> int:
    """Questions with a gold memory among the first K when ordered by `weights`."""
    found = 0
    for question in asked:
        order = np.argsort(-(question.signals @ weights), kind="stable")
        found += bool(question.gold[order[:K]].any())
    return found


def fitted(asked: list[Asked], start: NDArray[np.float64]) -> NDArray[np.float64]:
    """Coordinate ascent on hits() from `start`: each free weight moved by each step in
    turn, a move kept when it finds more, ROUNDS times over."""
    weights, best = start.copy(), hits(asked, start)
    free = [i for i, s in enumerate(SIGNALS) if s not in HELD]
    for _ in range(ROUNDS):
        for i in free:
            for step in STEPS:
                trial = weights.copy()
                trial[i] += step
                if (found := hits(asked, trial)) > best:
                    weights, best = trial, found
    return weights


def held_out_users(name: str, users: list[str]) -> list[list[str]]:
    """The folds: RealMem's bench users as one, each MADial user alone."""
    if name == "realmem":
        return [[u.user for u in make_plan("realmem", None, REALMEM_USERS).users]]
    return [[user] for user in users]


def measure(name: str, asked: list[Asked]) -> dict[str, Any]:
    """Over the held-out users' questions: hit@5 with the defaults, with the weights
    fitted without them, and with weights fitted to those very questions (in-sample).
    And the weights fitted without the held-out users (the last fold's: RealMem has
    one)."""
    start = defaults()
    held_out = held_out_users(name, sorted({a.user for a in asked}))
    default_hits = fitted_hits = 0
    weights = start
    for held in held_out:
        weights = fitted([a for a in asked if a.user not in held], start)
        test = [a for a in asked if a.user in held]
        default_hits += hits(test, start)
        fitted_hits += hits(test, weights)
    tested = [a for a in asked if any(a.user in held for held in held_out)]
    return {
        "questions": len(tested),
        "defaults": default_hits / len(tested),
        "fitted": fitted_hits / len(tested),
        "in_sample": hits(tested, fitted(tested, start)) / len(tested),
        "weights": weights,
    }


def report(name: str, model: str, got: dict[str, Any], figures: dict[str, float]) -> None:
    """One row of the table; its figures into `figures`."""
    across = got.get("realmem_fit")
    weights = " ".join(
        f"{s}={w:g}" for s, w in zip(SIGNALS, np.round(got["weights"], 2), strict=True)
    )
    print(
        f"{name:<10} {model:<6} {got['questions']:>8} {got['defaults']:>9.3f} "
        f"{got['fitted']:>7.3f} {'' if across is None else f'{across:.3f}':>11} "
        f"{got['in_sample']:>9.3f}  {weights}"
    )
    for key in ("defaults", "fitted", "realmem_fit", "in_sample"):
        if got.get(key) is not None:
            figures[f"{name}_{model}_hit5_{key}"] = round(got[key], 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=lambda s: s.split(","), default=list(DATASETS))
    parser.add_argument("--no-local", action="store_true", help="without the local model")
    args = parser.parse_args()
    started, figures = time.perf_counter(), dict[str, float]()
    print(f"{'dataset':<10} {'model':<6} {'held out':>8} {'defaults':>9} {'fitted':>7} "
          f"{'RealMem fit':>11} {'in-sample':>9}  fitted without the held-out users")  # fmt: skip
    for local in (False,) if args.no_local else (False, True):
        asked = {name: recorded(name, local) for name in args.datasets}
        got = {name: measure(name, questions) for name, questions in asked.items()}
        if "realmem" in got:  # the weights fitted without RealMem's held-out users, here
            for name, row in got.items():
                row["realmem_fit"] = (
                    hits(asked[name], got["realmem"]["weights"]) / len(asked[name])
                    if name != "realmem"
                    else row["fitted"]
                )
        for name, row in got.items():
            report(name, "local" if local else "none", row, figures)
    figures["seconds"] = round(time.perf_counter() - started, 1)
    emit(figures)


if __name__ == "__main__":
    main()
