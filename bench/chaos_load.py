"""The chaos bench's load: generated multi-session chats whose user turns each carry a
unique tag ("[u3s1t17]"), and the fake LLM's answer, one fact naming each tag, so the
store shows whether every turn was extracted exactly once (bench/chaos_harness.py)."""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass
from typing import Any

from memoryd.extraction import offline
from testkit.fakellm import parse_prompt

TAG = re.compile(r"\[(u\d+s\d+t\d+)\]")
TOPICS = [
    "my sister's wedding in June",
    "the quarterly report at work",
    "training for a half marathon",
    "moving to a flat near the river",
    "learning to cook Sichuan food",
    "the broken dishwasher",
    "a trip to Kyoto next spring",
    "my daughter's piano lessons",
]


def fact_for(tag: str) -> str:
    """The one fact the chaos LLM makes of the user turn tagged `tag`. The hash keeps any
    two facts far apart, so dedup never merges facts of different turns."""
    return f"Chaos fact {tag} {hashlib.sha1(tag.encode()).hexdigest()[:12]}"


def chaos_answer(messages: list[dict[str, Any]]) -> str:
    """One fact per tagged user turn; untagged turns get memoryd's offline rules."""
    turns, memories = parse_prompt(messages)
    facts: list[dict[str, Any]] = []
    for role, content in turns:
        match = TAG.search(content) if role == "user" else None
        if match:
            facts.append({"content": fact_for(match.group(1)), "confidence": 0.95})
    untagged = [(r, c) for r, c in turns if not TAG.search(c)]
    facts += [f.model_dump(mode="json") for f in offline.extract_facts(untagged, memories)]
    return json.dumps({"facts": facts})


@dataclass
class Conversation:
    agent_id: str
    user_id: str
    session_id: str
    turns: list[dict[str, Any]]

    @property
    def tags(self) -> list[str]:
        return [m.group(1) for t in self.turns if (m := TAG.search(t["content"]))]


def generate(users: int, sessions: int, turns: int, seed: int = 7) -> list[Conversation]:
    """Multi-session chats: alternating user and assistant turns of varied length (some
    long enough that batches are cut by tokens, not by count)."""
    rng = random.Random(seed)
    out = []
    for u in range(users):
        for s in range(sessions):
            items = []
            for t in range(turns):
                topic = rng.choice(TOPICS)
                if t % 2 == 0:
                    content = f"[u{u}s{s}t{t}] About {topic}: " + " ".join(
                        rng.choice(["so", "I think", "really", "again", "today", "we"])
                        for _ in range(rng.choice([5, 20, 60]))
                    )
                else:
                    content = f"That sounds important. Tell me more about {topic}. " * (
                        rng.choice([1, 3, 25])
                    )
                role = "user" if t % 2 == 0 else "assistant"
                items.append(
                    {
                        "agent_id": "chaos",
                        "user_id": f"u{u}",
                        "session_id": f"u{u}-s{s}",
                        "role": role,
                        "content": content,
                    }
                )
            out.append(Conversation("chaos", f"u{u}", f"u{u}-s{s}", items))
    return out
