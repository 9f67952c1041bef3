"""Keys in other words (memories/synonyms.py): what lands a fact on a scope's key with
no call, and what never does."""

from __future__ import annotations

import pytest

from memoryd.memories.synonyms import same_words


@pytest.mark.parametrize(
    ("key", "held", "lands_on"),
    [
        ("diet update", ["diet"], "diet"),
        ("project side project", ["side project"], "side project"),
        ("current employer", ["employer"], "employer"),
        # Different subjects that share words: never one key without the model's word.
        ("preferred name", ["name"], None),
        ("name", ["preferred name"], None),
        ("old address", ["address"], None),
        ("favourite city", ["city"], None),
    ],
)
def test_same_words_is_one_key_and_other_subjects_are_not(
    key: str, held: list[str], lands_on: str | None
) -> None:
    assert same_words(key, held) == lands_on
