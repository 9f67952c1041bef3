"""Would weights learned from data rank better than recall's? Recall re-scores its fused
candidates by a weighed sum of signals (rank.py, RecallSettings.rank_weight_*); this
bench fits those weights to the public datasets and scores them on users the fit did
not see.

Protocol: bench/quality.py's replay on SQLite (each user's facts remembered in time
order, each question recalled where the data asks it), without and with the local
model. Beside each question's recall, a read-only rank.recall keeps its first
CANDIDATES memories with their signals (ScoreParts), unchanged by that read. A question's
candidates are then ordered again by a weighed sum of those signals, the fused lists'
weight held at 1 and the conversation spread as recall gave it; the weights, started at
the defaults (0 for the signals recall does not weigh alone: the cosine, the trigram
similarity, the BM25 score over the question's best), are fitted by coordinate ascent on
hit@5 over the training users' questions. Held out: RealMem's five users that
bench/quality.py asks, trained on the other five; each MADial user in turn, trained on
the other. A fit can only reorder what the defaults placed in the first CANDIDATES.

    .venv/bin/python bench/rank_weights.py [--datasets realmem,madial_zh,madial_en]
        [--no-local]

Per dataset and configuration: held-out hit@5 with the defaults and with the fitted
weights; the weights fitted on RealMem's training users, on every question of the
dataset (recall has one set of weights for every user); and the fit's own hit@5 over
every user (in-sample, what a fit to the data could reach). One JSON line at the end.
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from numpy.typing import NDArray

from bench.common import emit
from bench.quality_memoryd import AGENT, ReplayStore
from bench.quality_plan import DATASETS, Question, make_plan

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


class Asked:
    """One question's candidates: their signals (a row each) and which are gold."""

    def __init__(self, user: str, signals: NDArray[np.float64], gold: NDArray[np.bool_]):
        self.user, self.signals, self.gold = user, signals, gold


class RecordingStore(ReplayStore):
    """bench/quality.py's replay, each question's candidates kept beside its recall."""

    asked: list[Asked]

    def _recall(self, user: str, question: Question, index: int, got: dict[str, Any]) -> None:
        super()._recall(user, question, index, got)
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
        self.asked.append(Asked(user, signals, np.array(gold, dtype=bool)))


def recorded(name: str, local: bool) -> list[Asked]:
    """Every question of dataset `name` (RealMem's ten users), with its candidates."""
    from memoryd.models.db import dispose_engines

    with ExitStack() as stack:
        store = RecordingStore(stack, "sqlite", local)
        store.asked = []
        store.ask(make_plan(name, None, None))
        dispose_engines()
    return store.asked


def defaults() -> NDArray[np.float64]:
    from memoryd.settings import Settings

    recall = Settings().recall
    weights = {s: getattr(recall, f"rank_weight_{s}", 0.0) for s in SIGNALS}
    weights.update(fused=recall.rank_weight_match, spread=-1.0)
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
        return [[u.user for u in make_plan("realmem", None, 5).users]]
    return [[user] for user in users]


def measure(name: str, asked: list[Asked]) -> dict[str, Any]:
    """Held-out hit@5 with the defaults and fitted, the in-sample fit's, and the weights
    fitted without the held-out users (the last fold's)."""
    start = defaults()
    users = sorted({a.user for a in asked})
    default_hits = fitted_hits = tested = 0
    for held in held_out_users(name, users):
        train = [a for a in asked if a.user not in held]
        test = [a for a in asked if a.user in held]
        weights = fitted(train, start)
        default_hits += hits(test, start)
        fitted_hits += hits(test, weights)
        tested += len(test)
    in_sample = fitted(asked, start)
    return {
        "questions": tested,
        "defaults": default_hits / tested,
        "fitted": fitted_hits / tested,
        "in_sample": hits(asked, in_sample) / len(asked),
        "weights": weights,
        "in_sample_weights": in_sample,
    }


def report(name: str, model: str, got: dict[str, Any], figures: dict[str, float]) -> None:
    """One row of the table; its figures into `figures`."""
    across = got.get("realmem_fit")
    weights = " ".join(
        f"{s}={w:g}" for s, w in zip(SIGNALS, np.round(got["in_sample_weights"], 2), strict=True)
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
    started, figures = time.perf_counter(), {}
    print(f"{'dataset':<10} {'model':<6} {'held out':>8} {'defaults':>9} {'fitted':>7} "
          f"{'RealMem fit':>11} {'in-sample':>9}  in-sample weights")  # fmt: skip
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
