"""Replacement at scale: does a new fact still retire the one it contradicts when the old
one is buried under thousands of other memories?

Each user first says facts of distinct subjects ("Call me Sam", "I live in Lisbon", "My
employer is Acme"…), through the whole pipeline. Then N other memories of real
conversation (RealMem, Apache-2.0: bench/data/NOTICE) are stored in the same scope. Then
the user contradicts every old fact, one session each ("Big news: I moved to Porto last
month"), and workers extract them with an LLM served over HTTP by the test suite's
scripted model: like a real model, it names `replaces` only for a memory it was shown.

Three scripted models name the later facts (bench/replacement_models.py): under the
old fact's key (`same-key`), under another name of its subject, in other words, word
order or Chinese (`synonym`), or under no key at all (`no-key`).

Reported per database, model and N: the share of contradictions resolved (old fact superseded,
new one active), duplicates left active (two active memories of one subject or one
text), the p95 of the prefetch (the memories a prompt shows: recall's search over the
scope's own memories) and of the whole candidate selection (the prefetch, the keys the
prompt lists, each fact's near duplicates and same-key memories), and of what that
selection adds to the prefetch, against a recall of the same scope and text, measured
in the same run: the baseline. Also the LLM calls per batch of the later sessions (the
extraction call, plus a follow-up where a fact needs one).

    .venv/bin/python bench/replacement.py          # N = 100, 1,000, 5,000, 10,000; 3 models
    .venv/bin/python bench/replacement.py --sizes 50000 --models same-key synonym
    .venv/bin/python bench/replacement.py --sizes 5000 --facts 10 --databases sqlite
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the repository, not bench/

from sqlalchemy import func, select, text

from bench.common import bench_database, emit, percentile, print_table
from bench.replacement_models import SUBJECT_OF, SYNONYMS, later_line, responder
from memoryd.client import MemoryClient
from memoryd.extraction.batch import extract_session
from memoryd.extraction.offline import extract_facts
from memoryd.memories.store import set_content
from memoryd.memories.subjects import same_key_memories, subject_key
from memoryd.memories.weights import INITIAL_WEIGHT, set_weight
from memoryd.models import key_index
from memoryd.models.db import get_engine, session_scope, utcnow
from memoryd.models.keys import Scope, SessionKey
from memoryd.models.tables import Category, ExtractionBatch, Memory, MemoryStatus, Tier
from memoryd.recall.candidates import nearby, related
from memoryd.recall.rank import recall
from memoryd.settings import Settings
from memoryd.text import content_hash
from testkit.fakellm import FakeLLM

DATA = Path(__file__).resolve().parent / "data"
AGENT = "bench"
FIRST_TURNS = 6  # old facts said per session
FAVOURITES = ["food", "colour", "band", "sport", "book", "film", "drink", "season", "game"]
SLOTS = ["employer", "job title", "manager", "gym", "car", "phone", "doctor", "bank", "team"]
DATED = [
    "dentist appointment",
    "next holiday",
    "anniversary dinner",
    "flight home",
    "yoga class",
    "car service",
]
PEOPLE = ["Sam", "Bob", "Alex", "Mia", "Noor", "Kai", "Lena", "Omar", "Ines", "Yuki"]
CITIES = ["Lisbon", "Porto", "Berlin", "Osaka", "Lima", "Accra", "Oslo", "Quito", "Hanoi"]
THINGS = ["ramen", "teal", "Blur", "tennis", "Dune", "Heat", "oolong", "autumn", "chess", "Acme"]


@dataclass(frozen=True)
class Contradiction:
    """One subject: what the user said first, and what they say later instead."""

    old: str
    new: str


def contradictions(user: int) -> list[Contradiction]:
    """Distinct subjects for one user (a scope holds one value of each): names, places,
    jobs, dates and preferences, their values varied per user."""

    def pick(pool: list[str], i: int, shift: int) -> str:
        return pool[(i * 3 + user * 7 + shift) % len(pool)]

    said = [
        Contradiction(f"Call me {pick(PEOPLE, 0, 0)}.", f"Actually, call me {pick(PEOPLE, 0, 1)}."),
        Contradiction(
            f"I live in {pick(CITIES, 1, 0)}.",
            f"Big news: I moved to {pick(CITIES, 1, 1)} last month.",
        ),
    ]
    for i, thing in enumerate(FAVOURITES, 2):
        old, new = pick(THINGS, i, 0), pick(THINGS, i, 1)
        said.append(
            Contradiction(f"My favourite {thing} is {old}.", f"My favourite {thing} is {new}.")
        )
    for i, slot in enumerate(SLOTS, 20):
        old, new = f"{pick(CITIES, i, 0)} {slot} {user}", f"{pick(CITIES, i, 2)} {slot} {user}"
        said.append(Contradiction(f"My {slot} is {old}.", f"My {slot} is {new} these days."))
    for i, slot in enumerate(DATED, 1):
        old, new = f"2027-0{i}-1{user % 10}", f"2027-{i + 4:02d}-2{user % 10}"
        said.append(Contradiction(f"My {slot} is on {old}.", f"My {slot} is on {new} now."))
    return said


def filler(n: int, seed: int) -> Iterator[tuple[str, str]]:
    """(name, content) of n memories of real conversation: RealMem's session memories,
    their 【topic】 as the name; past its 5,072 texts, numbered copies."""
    with gzip.open(DATA / "realmem.json.gz", "rt", encoding="utf-8") as f:
        users = json.load(f)["users"]
    texts = [m for u in users for s in u["sessions"] for m in s["memories"]]
    for i in range(n):
        text = texts[(i + seed) % len(texts)]
        topic, _, body = text.partition("】")
        name, content = (topic.lstrip("【").strip(), body.strip()) if body else ("", text)
        yield name, content if i < len(texts) else f"{content} (note {i // len(texts)})"


def store_filler(settings: Settings, scope: Scope, n: int, seed: int) -> None:
    """N active memories, as extraction stores them, written in chunks."""
    now = utcnow()
    rows = iter(filler(n, seed))
    while chunk := [row for _, row in zip(range(2000), rows, strict=False)]:
        with session_scope(settings.storage) as session:
            for name, content in chunk:
                memory = Memory(
                    agent_id=scope.agent_id,
                    user_id=scope.user_id,
                    category=Category.USER,  # where the facts are: every lookup meets it
                    tier=Tier.LONG,
                    status=MemoryStatus.ACTIVE,
                    name=name[:200],
                    tags=[],
                    confidence=0.9,
                    said_at=now - timedelta(minutes=1),
                    created_at=now,
                    updated_at=now,
                )
                set_content(memory, content)
                set_weight(memory, INITIAL_WEIGHT, now, settings.memories)
                session.add(memory)


def analyze(settings: Settings) -> None:
    """Settle the loaded tables as a store in service keeps them: the key index folded
    (the maintenance cycle's work), planner statistics and a visibility map that lets
    index-only scans skip the table (autovacuum's; this machine's PostgreSQL runs
    without it). SQLite plans without them."""
    while True:
        with session_scope(settings.storage) as session:
            if key_index.fold(session, 5000) < 5000:
                break
    if settings.storage.resolved_database_url.startswith("postgresql"):
        with get_engine(settings.storage).connect() as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            conn.execute(text("VACUUM (ANALYZE) memories, memory_terms, subject_keys"))


def say(settings: Settings, user: str, session: str, *lines: str) -> SessionKey:
    client = MemoryClient(settings, dispatch=False)
    turns = [
        {"agent_id": AGENT, "user_id": user, "session_id": session, "role": "user", "content": c}
        for c in lines
    ]
    client.enqueue_turns(turns)
    client.end_session(AGENT, user, session)
    return SessionKey(AGENT, user, session)


def extract_all(settings: Settings, key: SessionKey) -> None:
    while extract_session(settings, key).batches:
        pass


@dataclass
class Outcome:
    resolved: int = 0
    facts: int = 0
    duplicates: int = 0
    later_batches: int = 0
    later_calls: int = 0
    selection_ms: list[float] | None = None
    prefetch_ms: list[float] | None = None
    recall_ms: list[float] | None = None


def timed_selection(
    settings: Settings, scope: Scope, line: str, recall_first: bool
) -> tuple[float, float, float]:
    """What a batch reads to choose candidates (prepare.show, resolve's nearby, the
    write's same-key lookups), the prefetch alone (the memories its prompt shows), and
    a recall of the same text: milliseconds each. Whichever runs first meets the colder
    caches (the scope's statistics, the server's buffers): callers alternate."""
    facts = extract_facts([("user", line)], {})
    with session_scope(settings.storage, readonly=True) as session:

        def baseline() -> float:
            started = time.perf_counter()
            recall(session, settings, scope, line, now=utcnow())
            return time.perf_counter() - started

        recall_time = baseline() if recall_first else 0.0
        started = time.perf_counter()
        key_index.keys_in_use(session, scope)
        prefetch_started = time.perf_counter()
        related(session, settings, scope, line, settings.extraction.prefetch_limit, fill=True)
        prefetch = time.perf_counter() - prefetch_started
        nearby(session, settings, scope, facts)
        for fact in facts:  # what the write reads of each fact's key
            same_key_memories(session, scope, subject_key(fact.name), fact.category)
        selection = time.perf_counter() - started
        recall_time = recall_time if recall_first else baseline()
    return selection * 1000, prefetch * 1000, recall_time * 1000


def run_scenario(settings: Settings, size: int, facts: int, model: str = "same-key") -> Outcome:
    """`facts` contradictions over as many users as they need, each user's scope holding
    `size` other memories between the old facts and the new ones."""
    per_user = len(contradictions(0))
    outcome = Outcome(selection_ms=[], prefetch_ms=[], recall_ms=[])
    users = [f"u{u}" for u in range((facts + per_user - 1) // per_user)]
    plans = {u: contradictions(i)[: facts - i * per_user] for i, u in enumerate(users)}
    for u, plan in plans.items():
        for start in range(0, len(plan), FIRST_TURNS):  # within a batch's max_facts
            lines = [c.old for c in plan[start : start + FIRST_TURNS]]
            extract_all(settings, say(settings, u, f"first-{start}", *lines))
        store_filler(settings, Scope(AGENT, u), size, seed=len(u) * 131)
    analyze(settings)
    for u, plan in plans.items():
        for i, c in enumerate(plan):
            selection, prefetch, baseline = timed_selection(
                settings, Scope(AGENT, u), c.new, recall_first=i % 2 == 0
            )
            outcome.selection_ms.append(selection)  # type: ignore[union-attr]
            outcome.prefetch_ms.append(prefetch)  # type: ignore[union-attr]
            outcome.recall_ms.append(baseline)  # type: ignore[union-attr]
            extract_all(settings, say(settings, u, f"later-{i}", later_line(model, c.new)))
    with session_scope(settings.storage, readonly=True) as session:
        for u, plan in plans.items():
            outcome.facts += len(plan)
            outcome.resolved += sum(resolved(session, u, c) for c in plan)
            outcome.duplicates += duplicates(session, u, plan)
        later = select(func.count(), func.coalesce(func.sum(ExtractionBatch.llm_calls), 0))
        batches, calls = session.execute(
            later.where(ExtractionBatch.session_id.like("later-%"))
        ).one()
        outcome.later_batches, outcome.later_calls = int(batches), int(calls)
    return outcome


def resolved(session: object, user: str, c: Contradiction) -> bool:
    """The old fact is superseded, and what replaced it is active."""
    old = extract_facts([("user", c.old)], {})[0].content
    new = extract_facts([("user", c.new)], {})[0].content
    rows = dict(
        session.execute(  # type: ignore[attr-defined]
            select(Memory.content, Memory.status).where(
                Memory.agent_id == AGENT,
                Memory.user_id == user,
                Memory.content.in_([old, new]),
            )
        ).all()
    )
    return rows.get(old) == MemoryStatus.SUPERSEDED and rows.get(new) == MemoryStatus.ACTIVE


def duplicates(session: object, user: str, plan: list[Contradiction]) -> int:
    """Active memories beyond the first of one of the facts' subjects (under any of its
    names), or of one of their texts (the filler repeats its topics and some texts;
    those are not the user's facts)."""
    facts = [extract_facts([("user", c.new)], {})[0] for c in plan]
    active = (Memory.agent_id == AGENT, Memory.user_id == user, Memory.status == "active")
    names = {subject_key(n) for f in facts for n in [f.name, *SYNONYMS.get(f.name, [])]}
    by_key = select(Memory.name_key, func.count()).where(*active, Memory.name_key.in_(names))
    subjects: Counter[str] = Counter()
    for key, n in session.execute(by_key.group_by(Memory.name_key)):  # type: ignore[attr-defined]
        subjects[SUBJECT_OF.get(key, key)] += n
    extra = sum(n - 1 for n in subjects.values() if n > 1)
    hashes = [content_hash(f.content) for f in facts]
    counted = select(func.count()).where(*active, Memory.content_hash.in_(hashes))
    counted = counted.group_by(Memory.content_hash).having(func.count() > 1)
    extra += sum(n - 1 for n in session.scalars(counted))  # type: ignore[attr-defined]
    return extra


def measure(kind: str, model: str, size: int, facts: int, llm: FakeLLM, folder: Path) -> Outcome:
    llm.responder = responder(model)
    with bench_database(kind, folder, "replacement") as url:
        settings = Settings(
            database_url=url,
            data_dir=folder,
            llm_base_url=llm.base_url,
            llm_api_key="bench",
            llm_retries=0,
        )
        return run_scenario(settings, size, facts, model)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000, 10000])
    parser.add_argument("--models", nargs="+", default=["same-key", "synonym", "no-key"])
    parser.add_argument("--facts", type=int, default=52, help="contradictions per size")
    parser.add_argument("--databases", nargs="+", default=["postgres", "sqlite"])
    args = parser.parse_args()
    figures: dict[str, float | None] = {}
    with FakeLLM() as llm, tempfile.TemporaryDirectory() as tmp:
        for kind in args.databases:
            for model in args.models:
                rows = []
                for size in args.sizes:
                    out = measure(kind, model, size, args.facts, llm, Path(tmp))
                    rows += report(out, size, f"{kind}_{model}", figures)
                print_table(f"replacement on {kind}, {model} model, {args.facts} facts", rows)
    emit(figures)


Row = tuple[str, float, str, float | None]


def report(out: Outcome, size: int, prefix: str, figures: dict[str, float | None]) -> list[Row]:
    """The table rows of one run, its figures added to `figures`."""
    share = out.resolved / out.facts
    p95 = percentile(out.selection_ms or [0.0], 95)
    prefetch = percentile(out.prefetch_ms or [0.0], 95)
    base = percentile(out.recall_ms or [0.0], 95)
    # What replacement added to the prompt's prefetch: the keys listed, each fact's
    # near duplicates and same-key memories.
    pairs = zip(out.selection_ms or [], out.prefetch_ms or [], strict=True)
    lookups = percentile([whole - prefetched for whole, prefetched in pairs] or [0.0], 95)
    calls = out.later_calls / max(out.later_batches, 1)
    figures.update(
        {
            f"{prefix}_{size}_resolved": share,
            f"{prefix}_{size}_duplicates": out.duplicates,
            f"{prefix}_{size}_llm_calls_per_batch": calls,
            f"{prefix}_{size}_selection_p95_ms": p95,
            f"{prefix}_{size}_prefetch_p95_ms": prefetch,
            f"{prefix}_{size}_lookups_p95_ms": lookups,
            f"{prefix}_{size}_recall_p95_ms": base,
        }
    )
    return [
        (f"N={size}: contradictions resolved", share * 100, "%", None),
        (f"N={size}: duplicates left active", out.duplicates, "rows", None),
        (f"N={size}: LLM calls per later batch", calls, "calls", None),
        (f"N={size}: recall p95 (baseline)", base, "ms", 1.0),
        (f"N={size}: prefetch p95", prefetch, "ms", prefetch / base),
        (f"N={size}: candidate selection p95", p95, "ms", p95 / base),
        (f"N={size}: selection beyond the prefetch p95", lookups, "ms", lookups / base),
    ]


if __name__ == "__main__":
    main()
