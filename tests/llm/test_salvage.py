"""An answer cut off at the token limit keeps the items it completed (llm/salvage.py)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.orm import Session

from memoryd.extraction.batch import extract_session
from memoryd.llm.salvage import complete_prefix
from memoryd.settings import Settings
from testkit.fakellm import Action, FakeLLM
from tests.conftest import with_llm
from tests.extraction.test_failures import say

# What the real 1.5B model wrote for zh-team-01, looping until max_tokens cut it.
LOOPING = (
    '{"facts": [{"content": "组长是刘洋，人挺好", "name": "team lead", "confidence": 0.9}, '
    '{"content": "组长刘洋人挺好，需求老变", "name": "team lead", "confidence": 0.9}, '
    '{"content": "组长'
)

facts = st.lists(
    st.fixed_dictionaries({"content": st.text(min_size=1, max_size=30), "n": st.integers()}),
    min_size=1,
    max_size=6,
)


@given(facts, st.data())
def test_a_cut_answer_keeps_every_item_completed_before_the_cut(
    items: list[dict[str, object]], data: st.DataObject
) -> None:
    text = json.dumps({"facts": items}, ensure_ascii=False)
    first_end = len(json.dumps({"facts": items[:1]}, ensure_ascii=False)) - 2
    cut = data.draw(st.integers(min_value=first_end, max_value=len(text) - 2))
    salvaged = complete_prefix(text[:cut])
    assert salvaged is not None
    kept = salvaged["facts"]
    assert kept == items[: len(kept)] and len(kept) >= 1


def test_nothing_is_made_of_an_answer_cut_before_its_first_item() -> None:
    assert complete_prefix('{"facts": [{"content": "User likes') is None
    assert complete_prefix("not json at all") is None


def test_a_looping_answer_is_written_without_a_second_call(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = with_llm(settings, fake_llm)
    fake_llm.push(Action(content=LOOPING, finish_reason="length"))
    stats = extract_session(s, say(s, "组长是刘洋，人挺好，就是需求老变。"))
    assert fake_llm.calls == 1
    # Both complete items are kept; they tell one value of one slot (the team lead is
    # 刘洋), so one of them is written.
    assert stats.created == 1 and stats.rejected == 1 and stats.failed_batches == 0
