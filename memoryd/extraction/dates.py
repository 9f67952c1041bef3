"""Relative times a model left in a fact ("last week", "yesterday", "上个月"), written as the
dates they meant, counted from the day the turn was said (in the user's zone).

A memory is read weeks later, when "last week" means another week. The prompt asks the
model to resolve them; small models often don't, so the pipeline does it after the call.
The calendar arithmetic is dateutil's (relativedelta: "last Friday", month ends, leap
years); the phrases recognised are listed here, in English and Chinese.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from functools import partial

from dateutil.relativedelta import FR, MO, SA, SU, TH, TU, WE, relativedelta, weekday

_WEEKDAYS_EN = {
    "monday": MO, "tuesday": TU, "wednesday": WE, "thursday": TH,
    "friday": FR, "saturday": SA, "sunday": SU,
}  # fmt: skip
_WEEKDAYS_ZH = {"一": MO, "二": TU, "三": WE, "四": TH, "五": FR, "六": SA, "日": SU, "天": SU}
_NUMBERS_ZH = {"两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_NUMBERS_EN = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "a couple of": 2}


@dataclass(frozen=True)
class Span:
    """What a relative phrase meant: a day, a week (its Monday), a month or a year."""

    kind: str  # "day" | "week" | "month" | "year"
    start: date

    def english(self, after: str | None = None) -> str:
        """ "on 2026-11-27", or "since 2026-11-27" after a word that already says how."""
        if self.kind == "day":
            bare, how = self.start.isoformat(), "on"
        elif self.kind == "week":
            bare, how = f"the week of {self.start.isoformat()}", "in"
        elif self.kind == "month":
            bare, how = f"{self.start:%B %Y}", "in"
        else:
            bare, how = str(self.start.year), "in"
        return f"{after or how} {bare}"

    def chinese(self) -> str:
        d = self.start
        if self.kind == "day":
            return f"{d.year}年{d.month}月{d.day}日"
        if self.kind == "week":
            return f"{d.year}年{d.month}月{d.day}日那周"
        if self.kind == "month":
            return f"{d.year}年{d.month}月"
        return f"{d.year}年"


def _day(offset: int) -> Callable[[date, re.Match[str]], Span]:
    return lambda on, _m: Span("day", on + timedelta(days=offset))


def _week(offset: int) -> Callable[[date, re.Match[str]], Span]:
    return lambda on, _m: Span("week", on - timedelta(days=on.weekday()) + timedelta(weeks=offset))


def _month(offset: int) -> Callable[[date, re.Match[str]], Span]:
    return lambda on, _m: Span("month", on.replace(day=1) + relativedelta(months=offset))


def _year(offset: int) -> Callable[[date, re.Match[str]], Span]:
    return lambda on, _m: Span("year", date(on.year + offset, 1, 1))


def _weekday_en(direction: int) -> Callable[[date, re.Match[str]], Span]:
    """ "last Friday": the Friday before the turn's day; "next Friday": the one after."""

    def when(on: date, match: re.Match[str]) -> Span:
        day: weekday = _WEEKDAYS_EN[match.group("d").lower()]
        step = timedelta(days=direction)
        return Span("day", on + step + relativedelta(weekday=day(direction)))

    return when


def _weekday_zh(weeks: int) -> Callable[[date, re.Match[str]], Span]:
    """ "上周三": Wednesday of the week before the turn's; "下周五", "这周六" alike."""

    def when(on: date, match: re.Match[str]) -> Span:
        monday = on - timedelta(days=on.weekday()) + timedelta(weeks=weeks)
        return Span("day", monday + relativedelta(weekday=_WEEKDAYS_ZH[match.group("d")]))

    return when


def _ago(unit: str, sign: int = -1) -> Callable[[date, re.Match[str]], Span]:
    def when(on: date, match: re.Match[str]) -> Span:
        text = match.group("n").lower()
        n = int(text) if text.isdigit() else _NUMBERS_EN.get(text) or _NUMBERS_ZH.get(text, 1)
        if unit == "day":
            return Span("day", on + timedelta(days=sign * n))
        if unit == "week":
            return _week(sign * n)(on, match)
        if unit == "month":
            return _month(sign * n)(on, match)
        return _year(sign * n)(on, match)

    return when


_EN_NUMBER = r"(?P<n>\d{1,2}|two|three|four|five|six|a couple of)"
_EN_DAY = "|".join(_WEEKDAYS_EN)
_ZH_NUMBER = r"(?P<n>\d{1,2}|[两二三四五六七八九])"
# A preposition before the phrase: one the date's own replaces ("on", "in"), or one that
# says more and is kept ("since last year" -> "since 2025").
_PREP = r"(?:(?:on|in|during|over)\s+|(?P<after>since|from|by|until|till|before|after)\s+)?"

Rule = tuple[re.Pattern[str], Callable[[date, re.Match[str]], Span], bool]


def _en(regex: str, when: Callable[[date, re.Match[str]], Span]) -> Rule:
    return re.compile(rf"\b{_PREP}(?:{regex})\b", re.IGNORECASE), when, True


def _zh(regex: str, when: Callable[[date, re.Match[str]], Span]) -> Rule:
    return re.compile(regex), when, False


# How Chinese names a week relative to this one ("上周", "上个星期", "这礼拜" …).
_ZH_WEEKS = (
    ("(?:上上周|上上个?星期|上上个?礼拜)", -2),
    ("(?:上周|上个?星期|上个?礼拜)", -1),
    ("(?:这周|本周|这个?星期|这个?礼拜)", 0),
    ("(?:下周|下个?星期|下个?礼拜)", 1),
)

# Longest phrases first: "the day before yesterday" before "yesterday", "上周三" before "上周".
RULES: list[Rule] = [
    _en(r"the day before yesterday", _day(-2)),
    _en(r"the day after tomorrow", _day(2)),
    _en(r"yesterday|last night", _day(-1)),
    _en(r"today|tonight|this (?:morning|afternoon|evening)", _day(0)),
    _en(r"tomorrow", _day(1)),
    *(_en(rf"{_EN_NUMBER} {unit}s? ago", _ago(unit)) for unit in ("day", "week", "month", "year")),
    _en(r"a week ago", _day(-7)),
    _en(r"a month ago", _month(-1)),
    _en(r"a year ago", _year(-1)),
    _en(rf"last (?P<d>{_EN_DAY})", _weekday_en(-1)),
    _en(rf"next (?P<d>{_EN_DAY})", _weekday_en(1)),
    *(
        _en(f"{word} {unit}", span(offset))
        for word, offset in (("last", -1), ("this", 0), ("next", 1))
        for unit, span in (("week", _week), ("month", _month), ("year", _year))
    ),
    *(_zh(rf"{week}(?P<d>[一二三四五六日天])", _weekday_zh(n)) for week, n in _ZH_WEEKS),
    _zh(r"大前天", _day(-3)),
    _zh(r"前天", _day(-2)),
    _zh(r"昨天|昨晚|昨日", _day(-1)),
    _zh(r"今天早上|今天晚上|今天|今晚|今早|今日", _day(0)),
    _zh(r"大后天", _day(3)),
    _zh(r"后天", _day(2)),
    _zh(r"明天|明晚|明日", _day(1)),
    _zh(rf"{_ZH_NUMBER}天前", _ago("day")),
    _zh(rf"{_ZH_NUMBER}个?(?:星期|周|礼拜)前", _ago("week")),
    _zh(rf"{_ZH_NUMBER}个月前", _ago("month")),
    _zh(rf"{_ZH_NUMBER}年前", _ago("year")),
    *(_zh(week, _week(n)) for week, n in _ZH_WEEKS if n > -2),
    _zh(r"上个月|上月", _month(-1)),
    _zh(r"这个月|本月", _month(0)),
    _zh(r"下个月|下月", _month(1)),
    _zh(r"去年", _year(-1)),
    _zh(r"今年", _year(0)),
    _zh(r"明年", _year(1)),
    _zh(r"前年", _year(-2)),
]


@dataclass(frozen=True)
class Resolved:
    text: str
    phrases: int  # how many relative phrases were written as dates
    first: Span | None  # the first resolved (rules in order): an episode's date if a day


def resolve_relative(text: str, said_on: date) -> Resolved:
    """`text` with each relative phrase written as its date, from `said_on`."""
    spans: list[Span] = []
    for pattern, when, english in RULES:
        text = pattern.sub(partial(_write, said_on, when, english, spans), text)
    return Resolved(text, len(spans), spans[0] if spans else None)


def _write(
    said_on: date,
    when: Callable[[date, re.Match[str]], Span],
    english: bool,
    spans: list[Span],
    match: re.Match[str],
) -> str:
    span = when(said_on, match)
    spans.append(span)
    return span.english(match.groupdict().get("after")) if english else span.chinese()


def relative_phrases(text: str) -> int:
    """How many relative phrases `text` holds (what the bench counts as left)."""
    return sum(len(pattern.findall(text)) for pattern, _w, _e in RULES)


_MONTHS = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
# A day, however written: "2026-04-12" (not "the week of 2026-11-16"), "2026年3月4日",
# "5月9日", "May 9", "9 May".
_A_DAY = re.compile(
    r"(?<!week of )\b\d{4}-\d{2}-\d{2}\b|\d{1,2}月\d{1,2}[日号]"
    rf"|\b{_MONTHS}\s+\d{{1,2}}(?:st|nd|rd|th)?\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTHS}(?!\w)",
    re.IGNORECASE,
)


def names_a_day(text: str) -> bool:
    """Whether the text dates something to a day ("on 2026-04-12", "2026年3月4日",
    "May 9"), as an event that happened or is set for that day is written."""
    return _A_DAY.search(text) is not None
