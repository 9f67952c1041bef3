"""The packaged 1.5B model's real answers to bench/data/extraction_scenarios.json,
recorded by `python bench/extraction.py --record tests/extraction/recorded/<file>` with
the model served (`memoryd local-llm serve`), and replayed here through the whole
pipeline (amend, gate, reconcile, recall) on SQLite: what the robustness code makes of
what a small model actually wrote, checked on every change without a model."""

from __future__ import annotations

import argparse
import fcntl
import json
import os
from pathlib import Path

import pytest

from bench.extraction import load_scenarios, measure
from memoryd.settings import Settings

RECORDED = Path(__file__).parent / "recorded" / "qwen2.5-coder-1.5b.extract.small.v2.json"

# What replaying the recording measured when it was made (bench/extraction.py --replay):
# the pipeline may do better with these answers, never worse.
MEASURED = {"contradictions_resolved": 0.935, "recall_at_1": 0.977, "gold_recall": 0.873}


@pytest.fixture(scope="module")
def figures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, float]:
    """Measured once per run, not once per xdist worker: the replay takes some ten
    seconds of CPU, and the workers share the run's base temporary folder."""
    run = tmp_path_factory.getbasetemp()  # under xdist, a worker's folder in the run's
    shared = (run.parent if "PYTEST_XDIST_WORKER" in os.environ else run) / "recorded.json"
    with shared.with_suffix(".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other workers wait for the first one's
        if not shared.exists():
            shared.write_text(json.dumps(_replayed()))
        return dict(json.loads(shared.read_text()))


def _replayed() -> dict[str, float]:
    args = argparse.Namespace(db="sqlite", replay=RECORDED, record=None, misses=False)
    base = Settings(
        extract_prompt="extract.small.v2",
        small_model_checks=True,
        llm_base_url="http://127.0.0.1:9/v1",  # never called: the answers are replayed
        extraction_model="qwen2.5-coder-1.5b",
    )
    return measure("replayed", base, load_scenarios(), args)


def test_every_answer_is_used_at_once(figures: dict[str, float]) -> None:
    # An answer the model loops in until max_tokens cuts it keeps its complete items
    # (llm/salvage.py, tests/llm/test_salvage.py): one of 99 in an earlier recording.
    assert figures["valid_answers"] >= 0.99


def test_no_other_persons_fact_is_stored_as_the_users(figures: dict[str, float]) -> None:
    assert figures["other_person_as_user"] == 0


def test_relative_dates_are_written_as_dates(figures: dict[str, float]) -> None:
    assert figures["relative_dates_left"] <= 0.05


@pytest.mark.parametrize("measure_name", sorted(MEASURED))
def test_the_store_is_as_right_as_when_measured(
    figures: dict[str, float], measure_name: str
) -> None:
    assert figures[measure_name] >= MEASURED[measure_name] - 0.0005  # figures are rounded
