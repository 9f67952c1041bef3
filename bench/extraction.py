"""Extraction with the models people run: the labelled scenarios of
bench/data/extraction_scenarios.json (English and Chinese conversations of several
sessions days apart) through the real pipeline (`extract_session`), and what the store
holds afterwards: gold facts found, wrong ones kept, other people's facts stored as the
user's, relative dates left, keys, contradictions resolved, the scenario's question
answered by recall. Beside the real model: the offline rules and the scripted model
(the test suite's, answering with the rules over the real HTTP path).

    python bench/extraction.py                      # the packaged 1.5B model, served here
    python bench/extraction.py --url http://host:8000/v1 --model NAME
    python bench/extraction.py --record tests/extraction/recorded/NAME.json
    python bench/extraction.py --replay tests/extraction/recorded/NAME.json

--record keeps each call's prompt and completion; --replay answers from such a file
(what the suite does: real answers, without a model).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the repository, not bench/

from sqlalchemy import func, select

from bench.common import bench_database, emit, print_table, served_model
from bench.extraction_measures import Tally, check_scope
from memoryd.client import MemoryClient
from memoryd.extraction.batch import extract_session
from memoryd.extraction.extractors import LLMExtractor, OfflineExtractor
from memoryd.extraction.views import Extractor
from memoryd.llm.client import LLMResult
from memoryd.models.db import dispose_engines, session_scope
from memoryd.models.keys import SessionKey
from memoryd.models.tables import ExtractionBatch, Memory
from memoryd.settings import Settings

SCENARIOS = Path(__file__).parent / "data" / "extraction_scenarios.json"
AGENT = "bench-extraction"


def load_scenarios(path: Path = SCENARIOS) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(path.read_text("utf-8"))
    return data


class Recorder:
    """Wraps an LLM client's HTTP call: every call's prompt and raw completion, in order,
    and how many answers were valid at the first try. The client's own parsing and
    repair round run as ever."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: list[dict[str, Any]] = []
        self.valid = 0
        self.where = ""  # "scenario#session", set by the runner
        self._create = client._create
        client._create = self.create

    def create(self, **kwargs: Any) -> Any:
        response = self._create(**kwargs)
        choice = response.choices[0] if response.choices else None
        self.calls.append(
            {
                "at": self.where,
                "messages": kwargs["messages"],
                "answer": choice.message.content if choice else "",
                "finish": choice.finish_reason if choice else None,
            }
        )
        return response

    def complete_json(self, model: str, messages: Any, schema: Any) -> LLMResult[Any]:
        before = len(self.calls)
        result = self.client.complete_json(model, messages, schema)
        self.valid += result.calls == 1 and len(self.calls) == before + 1
        return result  # type: ignore[no-any-return]


class Replayer(Recorder):
    """Answers each call with the completion recorded for the same place, in order."""

    def __init__(self, client: Any, path: Path) -> None:
        super().__init__(client)
        self.answers: dict[str, list[tuple[str, str]]] = {}
        for call in json.loads(path.read_text("utf-8"))["calls"]:
            answer = (call["answer"], call.get("finish") or "stop")
            self.answers.setdefault(call["at"], []).append(answer)
        self._create = self.recorded

    def recorded(self, **kwargs: Any) -> Any:
        answers = self.answers.get(self.where) or [('{"facts": []}', "stop")]
        content, finish = answers.pop(0)
        message = SimpleNamespace(content=content)
        choice = SimpleNamespace(message=message, finish_reason=finish)
        return SimpleNamespace(choices=[choice], usage=None, model=kwargs["model"])


def run(
    settings: Settings, scenarios: list[dict[str, Any]], extractor: Extractor, tap: Any
) -> Tally:
    """Every scenario in its own scope, session after session, then its figures."""
    tally = Tally()
    client = MemoryClient(settings, dispatch=False)
    for scenario in scenarios:
        first: tuple[set[str], int] = (set(), 0)
        for number, conv in enumerate(scenario["sessions"]):
            if tap is not None:
                tap.where = f"{scenario['id']}#{number}"
            key = say(client, scenario["id"], number, conv)
            started = time.perf_counter()
            while extract_session(settings, key, extractor=extractor).batches:
                pass
            tally.seconds += time.perf_counter() - started
            tally.turns += len(conv["turns"])
            if number == 0:
                first = _scope_now(settings, scenario["id"])
        with session_scope(settings.storage, readonly=True) as session:
            check_scope(session, client, AGENT, scenario, first, tally)
    with session_scope(settings.storage, readonly=True) as session:
        row = session.execute(
            select(
                func.count(),
                func.coalesce(func.sum(ExtractionBatch.tokens_in), 0),
                func.coalesce(func.sum(ExtractionBatch.tokens_out), 0),
                func.coalesce(func.sum(ExtractionBatch.llm_calls), 0),
            )
        ).one()
    tally.batches, tally.tokens = row[0], row[1] + row[2]
    tally.calls = row[3] if tap is None else len(tap.calls)
    tally.valid = tally.calls if tap is None else tap.valid
    return tally


def say(client: MemoryClient, user: str, number: int, conv: dict[str, Any]) -> SessionKey:
    at = datetime.fromisoformat(conv["at"])
    session = f"{user}-s{number}"
    client.enqueue_turns(
        [
            {
                "agent_id": AGENT,
                "user_id": user,
                "session_id": session,
                "role": role,
                "content": content,
                "turn_key": f"{session}-{i}",
                "timestamp": (at + timedelta(minutes=i)).isoformat(),
            }
            for i, (role, content) in enumerate(conv["turns"])
        ]
    )
    client.end_session(AGENT, user, session)
    return SessionKey(AGENT, user, session)


def _scope_now(settings: Settings, user: str) -> tuple[set[str], int]:
    with session_scope(settings.storage, readonly=True) as session:
        rows = session.execute(
            select(Memory.id, Memory.name_key).where(
                Memory.agent_id == AGENT, Memory.user_id == user
            )
        ).all()
    return {k for _i, k in rows if k}, max((i for i, _k in rows), default=0)


def measure(
    kind: str, base: Settings, scenarios: list[dict[str, Any]], args: argparse.Namespace
) -> dict[str, float]:
    with (
        tempfile.TemporaryDirectory() as folder,
        bench_database(args.db, Path(folder), f"extraction_{kind}") as url,
    ):
        settings = base.updated(**{"database_url": url, "data_dir": Path(folder)})
        extractor: Extractor
        tap: Any = None
        if kind == "offline rules":
            extractor = OfflineExtractor()
        else:
            llm = LLMExtractor(settings)
            tap = Replayer(llm.client, args.replay) if kind == "replayed" else Recorder(llm.client)
            llm.client = tap
            extractor = llm
        tally = run(settings, scenarios, extractor, tap)
        dispose_engines()
    if args.record and kind == "model" and tap is not None:
        meta = {"model": base.llm.extraction_model, "prompt": base.llm.extract_prompt}
        args.record.write_text(json.dumps({**meta, "calls": tap.calls}, ensure_ascii=False))
    if args.misses:
        print(f"\n{kind}: " + "\n  ".join(["misses", *tally.misses]))
    return tally.figures()


def kinds(args: argparse.Namespace) -> list[str]:
    chosen = ["offline rules", "scripted"]
    if args.replay:
        return [*chosen, "replayed"]
    return chosen if args.no_model else [*chosen, "model"]


def model_settings(args: argparse.Namespace, url: str) -> Settings:
    return Settings(
        llm_base_url=url,
        extraction_model=args.model,
        extract_prompt=args.prompt,
        small_model_checks=not args.standard_checks,
        llm_timeout_seconds=600,
        llm_retries=1,
        batch_size=20,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="an OpenAI-compatible endpoint (default: serve --model)")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b", help="(default: %(default)s)")
    parser.add_argument("--prompt", default="extract.small.v2", help="(default: %(default)s)")
    parser.add_argument(
        "--standard-checks", action="store_true", help="MEMORYD_SMALL_MODEL_CHECKS=false"
    )
    parser.add_argument("--db", default="sqlite", choices=["sqlite", "postgres"])
    parser.add_argument("--scenarios", type=Path, default=SCENARIOS, help="a scenario file")
    parser.add_argument("--only", type=int, default=0, help="the first N scenarios")
    parser.add_argument("--record", type=Path, help="keep the model's prompts and answers")
    parser.add_argument("--replay", type=Path, help="answer from a recording, no model")
    parser.add_argument("--no-model", action="store_true", help="rules and scripted only")
    parser.add_argument("--misses", action="store_true", help="list what each run got wrong")
    args = parser.parse_args()
    scenarios = load_scenarios(args.scenarios)[: args.only or None]
    if args.replay:  # the prompt the answers were recorded with
        args.prompt = json.loads(args.replay.read_text("utf-8"))["prompt"]
    results: dict[str, dict[str, float]] = {}
    for kind in kinds(args):
        results[kind] = run_kind(kind, args, scenarios)
    report(results, args)


def run_kind(
    kind: str, args: argparse.Namespace, scenarios: list[dict[str, Any]]
) -> dict[str, float]:
    if kind == "offline rules":
        return measure(kind, Settings(), scenarios, args)
    if kind == "scripted":
        from testkit.fakellm import FakeLLM

        with FakeLLM() as llm:
            scripted = argparse.Namespace(**{**vars(args), "model": "scripted"})
            return measure(kind, model_settings(scripted, llm.base_url), scenarios, args)
    if kind == "replayed":
        recorded = json.loads(args.replay.read_text("utf-8"))
        replay = argparse.Namespace(**{**vars(args), "prompt": recorded["prompt"]})
        return measure(kind, model_settings(replay, "http://127.0.0.1:9/v1"), scenarios, args)
    if args.url:
        return measure(kind, model_settings(args, args.url), scenarios, args)
    with served_model(args.model) as url:
        return measure(kind, model_settings(args, url), scenarios, args)


UNITS = {
    "wrong_facts_kept": "facts",
    "other_person_as_user": "facts",
    "cross_key_replacements": "memories",
    "llm_calls_per_turn": "calls",
    "tokens_per_turn": "tokens",
    "seconds_per_batch": "s",
}


def report(results: dict[str, dict[str, float]], args: argparse.Namespace) -> None:
    baseline = results["offline rules"]
    for kind, figures in results.items():
        label = f"{kind} ({args.model}, {args.prompt})" if kind in ("model", "replayed") else kind
        rows = [
            (
                name,
                value,
                UNITS.get(name, "share"),
                value / baseline[name] if baseline[name] else None,
            )
            for name, value in figures.items()
        ]
        print_table(f"extraction: {label}, {args.db}, vs the offline rules", rows)
    emit(
        {
            f"{kind.replace(' ', '_')}.{name}": value
            for kind, figures in results.items()
            for name, value in figures.items()
        }
    )


if __name__ == "__main__":
    main()
