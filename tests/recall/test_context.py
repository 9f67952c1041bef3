"""The <memory-context> block: format, grouping, budget, empty when nothing is relevant."""

from __future__ import annotations

from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.models.tables import Category
from memoryd.settings import Settings
from memoryd.text import estimate_tokens
from tests.factories import make_memory


def seed(db: Session, settings: Settings) -> MemoryClient:
    make_memory(
        db, settings, "用户偏好简洁直接的回答风格，不喜欢冗长的解释。", name="用户偏好-简洁风格"
    )
    make_memory(
        db,
        settings,
        "Sprint goal: finish the payment module refactor by 15 April.",
        name="Current sprint goal",
        category=Category.PROJECT,
    )
    make_memory(db, settings, "Do not auto-format the user's code.", category=Category.FEEDBACK)
    make_memory(
        db, settings, "Payment API docs: https://example.com/pay", category=Category.REFERENCE
    )
    db.commit()
    return MemoryClient(settings)


def test_block_format_grouped_by_category(settings: Settings, db: Session) -> None:
    client = seed(db, settings)
    block = client.build_context(
        "payment module refactor, code format, 回答风格", "bot", "ann", token_budget=1000
    )
    assert block.startswith("<memory-context>\n") and block.endswith("\n</memory-context>")
    order = [line.split("]")[0] + "]" for line in block.splitlines() if line.startswith("[")]
    assert order == ["[user]", "[feedback]", "[project]", "[reference]"]
    assert "[project] Current sprint goal\nSprint goal: finish" in block
    assert "[feedback] Do not auto-format the user's code." in block  # no duplicate title


def test_empty_when_nothing_is_relevant(settings: Settings, db: Session) -> None:
    client = seed(db, settings)
    assert client.build_context("quantum chromodynamics", "bot", "ann") == ""
    assert client.build_context("", "bot", "ann") == ""
    assert client.build_context("payment", "bot", "nobody") == ""
    assert client.build_context("payment", "bot", "ann", token_budget=10) == ""  # nothing fits


@hsettings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(budget=st.integers(min_value=0, max_value=400))
def test_never_over_budget(settings: Settings, db: Session, budget: int) -> None:
    client = MemoryClient(settings)
    if not client.list("bot", "ann"):
        seed(db, settings)
    block = client.build_context(
        "payment sprint code format 风格 docs", "bot", "ann", token_budget=budget
    )
    assert estimate_tokens(block) <= budget
