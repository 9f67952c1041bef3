"""The bench's LLM judge (testkit/llm_judge.py) reads a yes-or-no answer's chances."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from testkit.llm_judge import yes_share


def _top(**chances: float) -> list[SimpleNamespace]:
    return [SimpleNamespace(token=t, logprob=math.log(p)) for t, p in chances.items()]


def test_yes_against_no_whatever_their_case_and_spaces() -> None:
    top = _top(Yes=0.5, **{" yes": 0.1, "No": 0.2, "maybe": 0.2})
    assert yes_share(top) == pytest.approx(0.6 / 0.8)


def test_an_answer_naming_neither_is_undecided() -> None:
    assert yes_share(_top(maybe=0.9, perhaps=0.1)) == 0.5
