"""The offline rules' single-valued slots: what they read, and what they leave alone."""

from __future__ import annotations

import pytest

from memoryd.extraction.offline import extract_facts


@pytest.mark.parametrize(
    ("said", "read"),
    [
        ("I live in Berlin and I prefer tea", ("Lives in Berlin", "home city")),
        (
            "Sorry, we finally relocated to Lisbon, boxes everywhere.",
            ("Lives in Lisbon", "home city"),
        ),
        ("我们家搬去杭州了，房租便宜好多。", ("住在杭州", "home city")),
        ("Just started at Spotify, yesterday was my first day!", ("Works at Spotify", "employer")),
        ("I work at Acme as a nurse.", ("Works at Acme", "employer")),
        ("I started at Globex Labs last week.", ("Works at Globex Labs", "employer")),
    ],
)
def test_a_single_valued_slot_is_read(said: str, read: tuple[str, str]) -> None:
    facts = [(f.content, f.name) for f in extract_facts([("user", said)], {}) if f.single]
    assert facts[0] == read


@pytest.mark.parametrize("said", ["I work at home on Fridays", "I just started at the bakery"])
def test_no_employer_without_a_name(said: str) -> None:
    assert [f for f in extract_facts([("user", said)], {}) if f.name == "employer"] == []
