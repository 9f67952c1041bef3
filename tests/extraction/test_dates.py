"""Relative times in a fact are written as the dates they meant, from the day said."""

from __future__ import annotations

from datetime import date

import pytest

from memoryd.extraction.dates import relative_phrases, resolve_relative

SATURDAY = date(2026, 11, 28)


@pytest.mark.parametrize(
    ("said", "written"),
    [
        ("I moved to Lisbon last week.", "I moved to Lisbon in the week of 2026-11-16."),
        ("Ran a half marathon yesterday", "Ran a half marathon on 2026-11-27"),
        ("Dentist next Friday", "Dentist on 2026-12-04"),
        ("Met her last Friday", "Met her on 2026-11-27"),
        ("Started at Acme 3 months ago", "Started at Acme in August 2026"),
        ("Has lived here since last year", "Has lived here since 2025"),
        ("Got a cat two days ago", "Got a cat on 2026-11-26"),
        ("我上个月搬到了杭州", "我2026年10月搬到了杭州"),
        ("上周三去看了医生", "2026年11月18日去看了医生"),
        ("我们下周五见", "我们2026年12月4日见"),
        ("前天买了车", "2026年11月26日买了车"),
        ("去年开始学吉他", "2025年开始学吉他"),
    ],
)
def test_a_relative_time_becomes_its_date(said: str, written: str) -> None:
    resolved = resolve_relative(said, SATURDAY)
    assert (resolved.text, resolved.phrases) == (written, 1)
    assert relative_phrases(resolved.text) == 0


def test_a_fact_without_relative_time_is_left_as_it_is() -> None:
    text = "Works at Acme since 2024-03-01, on Fridays from home"
    assert resolve_relative(text, SATURDAY).text == text
    assert relative_phrases(text) == 0


def test_the_first_phrase_dates_an_episode() -> None:
    first = resolve_relative("Yesterday ran 10 km, tomorrow a rest", SATURDAY).first
    assert first is not None and (first.kind, first.start) == ("day", date(2026, 11, 27))


def test_last_weekday_is_never_the_day_itself() -> None:
    assert resolve_relative("last Saturday", SATURDAY).text == "on 2026-11-21"
    assert resolve_relative("next Saturday", SATURDAY).text == "on 2026-12-05"
