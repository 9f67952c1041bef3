"""An LLM judging relevance, for the rerank server: each document's score is the chance
the model gives to "yes" against "no" as the first word of its answer to "is this memory
relevant to the conversation?", read from the answer's top log-probabilities (one token
per document, the conversation first so that a server caching the prompt's prefix reads
it once). Any OpenAI-compatible chat endpoint that returns logprobs will do; the bench
uses a packaged local model (`bench/quality.py --rerank 10 --judge qwen2.5-coder-1.5b`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from openai import OpenAI

SYSTEM = (
    "You decide whether a memory about the user is relevant to what the user is "
    "talking about now. Answer yes or no."
)
QUESTION = "Is this memory relevant to the conversation? Answer yes or no."


@dataclass
class LLMJudge:
    base_url: str
    model: str
    client: Any = field(init=False)

    def __post_init__(self) -> None:
        self.client = OpenAI(base_url=self.base_url, api_key="none", timeout=300, max_retries=0)

    def __call__(self, query: str, documents: list[str]) -> list[float]:
        return [self.yes(query, document) for document in documents]

    def yes(self, query: str, document: str) -> float:
        """P(yes) / (P(yes) + P(no)) for the first token; 0.5 when neither is listed."""
        answer = self.client.chat.completions.create(
            model=self.model,
            messages=[
                {"role": "system", "content": SYSTEM},
                {
                    "role": "user",
                    "content": f"Conversation:\n{query}\n\nMemory: {document}\n\n{QUESTION}",
                },
            ],
            max_tokens=1,
            temperature=0,
            logprobs=True,
            top_logprobs=10,
        )
        return yes_share(answer.choices[0].logprobs.content[0].top_logprobs)


def yes_share(top: list[Any]) -> float:
    """The share of "yes" among the "yes" and "no" of a token's top log-probabilities
    (case and spaces ignored)."""
    chance = {"yes": 0.0, "no": 0.0}
    for candidate in top:
        word = candidate.token.strip().lower()
        if word in chance:
            chance[word] += math.exp(candidate.logprob)
    total = chance["yes"] + chance["no"]
    return chance["yes"] / total if total else 0.5
