"""bench/quality.py's datasets as timelines: each user's facts in the order they were
said, with each question at the point where it was asked, and how a ranked list is
scored against a question's gold sources."""

from __future__ import annotations

import gzip
import json
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, time, timedelta
from pathlib import Path
from typing import Any, NamedTuple

DATA = Path(__file__).resolve().parent / "data"
DATASETS = ("realmem", "madial_zh", "madial_en")
KS = (1, 5, 10)
SEED = 20260101
REALMEM_USERS = 5  # of 10 asked by default: loading a user's history is what costs
NOON = time(12)


@dataclass
class Question:
    query: str
    gold: frozenset[str]  # sources that count as a hit


class Event(NamedTuple):
    """("facts", [(text, source), ...]) or ("ask", question index), on the day the data
    gives it: the bench replays each event at `at` (UTC, noon unless the data tells
    conversations of one day apart: conversation_times) of its day. The facts of one
    event are said together, as one conversation's are."""

    kind: str
    payload: Any
    day: date
    at: time = NOON


def conversation_times(count: int) -> list[time]:
    """When `count` conversations of one day are replayed: around noon, an hour apart,
    closer past 24 a day (the data has up to 34), never 30 minutes or less apart, which
    recall would take for one conversation, below 48."""
    step = min(60, 24 * 60 // max(count, 1))
    first = 12 * 60 - (count - 1) * step // 2
    return [time(*divmod(first + i * step, 60)) for i in range(count)]


@dataclass
class UserPlan:
    """One scope's timeline, in time order."""

    user: str
    events: list[Event] = field(default_factory=list)


@dataclass
class Plan:
    name: str
    questions: list[Question]
    users: list[UserPlan]
    total_questions: int  # before sampling
    anchors: dict[str, list[list[str]]] = field(default_factory=dict)  # model -> top-20
    sampling: str = ""  # how the questions were chosen, when not all of them

    @property
    def facts(self) -> int:
        return sum(len(e.payload) for u in self.users for e in u.events if e.kind == "facts")


def read(name: str) -> dict[str, Any]:
    with gzip.open(DATA / f"{name}.json.gz", "rt", encoding="utf-8") as f:
        return json.load(f)  # type: ignore[no-any-return]


def sample(total: int, limit: int | None) -> list[int]:
    if limit is None or limit >= total:
        return list(range(total))
    return sorted(random.Random(SEED).sample(range(total), limit))


def trim(user: UserPlan) -> UserPlan | None:
    """Drop the facts after the user's last question, and users with no question."""
    asks = [i for i, event in enumerate(user.events) if event.kind == "ask"]
    if not asks:
        return None
    return UserPlan(user.user, user.events[: asks[-1] + 1])


def realmem_plan(limit: int | None, users: int | None = None) -> Plan:
    data = read("realmem")
    people = data["users"]
    if users is not None and users < len(people):
        chosen = set(random.Random(SEED).sample(range(len(people)), users))
        people = [p for i, p in enumerate(people) if i in chosen]
    flat = [
        (u, s, q)
        for u, user in enumerate(people)
        for s, session in enumerate(user["sessions"])
        for q in range(len(session["questions"]))
    ]
    keep = {flat[i] for i in sample(len(flat), limit)}
    questions: list[Question] = []
    users = []
    for u, user in enumerate(people):
        if trimmed := trim(_realmem_user(u, user, keep, questions)):
            users.append(trimmed)
    total = sum(len(s["questions"]) for user in data["users"] for s in user["sessions"])
    how = []
    if len(people) < len(data["users"]):
        names = ", ".join(p["name"] for p in people)
        how.append(
            f"the {len(people)} of {len(data['users'])} users chosen with seed {SEED}: {names}"
        )
    if len(questions) < len(flat):
        how.append(f"a sample of their questions, seed {SEED}")
    return Plan("realmem", questions, users, total, sampling="; ".join(how))


def _realmem_user(
    u: int, user: dict[str, Any], keep: set[tuple[int, int, int]], questions: list[Question]
) -> UserPlan:
    """One RealMem user's timeline: each session a conversation, its kept questions asked
    (appended to `questions`) before its facts are said."""
    sessions: list[tuple[date, list[Event]]] = []
    day, shift = date.min, timedelta(0)
    for s, session in enumerate(user["sessions"]):
        # Two users' dates go back midway (114 and 107 days; the sessions after carry
        # one or two dates in the data): the rest of their timeline moves forward by
        # the gap, keeping its order and its intervals.
        said = date.fromisoformat(session["time"]) + shift
        shift += max(day - said, timedelta(0))
        day = max(day, said)
        events = []
        for q, question in enumerate(session["questions"]):
            if (u, s, q) in keep:
                events.append(Event("ask", len(questions), day))
                questions.append(Question(question["text"], frozenset(question["evidence"])))
        if session["memories"]:
            memories = [(m, session["id"]) for m in session["memories"]]
            events.append(Event("facts", memories, day))
        if events:
            sessions.append((day, events))
    # Sessions of one day are conversations of their own (up to 34 on a day).
    per_day = Counter(day for day, _events in sessions)
    times = {day: iter(conversation_times(count)) for day, count in per_day.items()}
    plan = UserPlan(f"realmem:{user['name']}")
    for day, events in sessions:
        at = next(times[day])
        plan.events += [event._replace(at=at) for event in events]
    return plan


def madial_plan(lang: str, limit: int | None) -> Plan:
    data = read(f"madial_{lang}")
    chosen = sample(len(data["questions"]), limit)
    questions = [
        Question(
            data["questions"][i]["query"], frozenset(map(str, data["questions"][i]["relevant"]))
        )
        for i in chosen
    ]
    # MADial dates its memories, not its questions: they are asked the day after its
    # newest memory.
    asked = max(date.fromisoformat(m["time"]) for m in data["memories"]) + timedelta(days=1)
    users = []
    for user in sorted({m["user"] for m in data["memories"]}):
        memories = sorted(
            (m for m in data["memories"] if m["user"] == user), key=lambda m: (m["time"], m["id"])
        )
        plan = UserPlan(f"madial_{lang}:{user}")
        # Each memory sums up a dialogue of its own, said in a conversation of its own.
        per_day = Counter(m["time"] for m in memories)
        times = {day: iter(conversation_times(count)) for day, count in per_day.items()}
        for m in memories:
            said = [(m["text"], str(m["id"]))]
            at = next(times[m["time"]])
            plan.events.append(Event("facts", said, date.fromisoformat(m["time"]), at))
        plan.events += [
            Event("ask", n, asked)
            for n, i in enumerate(chosen)
            if data["questions"][i]["user"] == user
        ]
        if trimmed := trim(plan):
            users.append(trimmed)
    anchors = {
        model: [[str(x) for x in lists[i]] for i in chosen]
        for model, lists in sorted(data["anchors"].items())
    }
    how = f"a sample, seed {SEED}" if len(chosen) < len(data["questions"]) else ""
    return Plan(f"madial_{lang}", questions, users, len(data["questions"]), anchors, how)


def make_plan(name: str, limit: int | None, realmem_users: int | None) -> Plan:
    if name == "realmem":
        return realmem_plan(limit, realmem_users)
    return madial_plan(name.split("_")[1], limit)


def first_hit(ranked_sources: Iterable[Iterable[str]], gold: frozenset[str]) -> int | None:
    """1-based rank of the first result with a gold source, or None within the list."""
    for rank, sources in enumerate(ranked_sources, 1):
        if gold.intersection(sources):
            return rank
    return None


def hit_rates(ranks: Sequence[int | None]) -> dict[int, float]:
    return {k: sum(r is not None and r <= k for r in ranks) / len(ranks) for k in KS}
