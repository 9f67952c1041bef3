"""Pages of a list: where the screen is ("1–50 of 1,234"), and the links before and after.

Totals are counted with a cap (models.db.capped_count): past COUNT_CAP rows beyond the
page shown, the screen says "1,000+" instead of reading a 50,000-row scope to the end."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from babel.numbers import format_decimal
from fastapi import Query, Request

from memoryd.models.db import COUNT_CAP
from memoryd.models.schemas import MAX_PAGE

PAGE_SIZE = 50
MAX_OFFSET = 1_000_000

Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET)]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE)]


def count_cap(offset: int) -> int:
    """How far a total is counted: COUNT_CAP rows past the page's start (so the total
    is never below the rows shown and costs the same on every page), and one more, which
    tells a list of exactly that many from a longer one."""
    return offset + COUNT_CAP + 1


@dataclass(frozen=True)
class Pager:
    """One page of a list: `shown` rows from `offset`, out of `total` (at least, when
    `capped`). `param` names the query parameter (two lists on one screen)."""

    request: Request
    offset: int
    limit: int
    shown: int
    total: int
    param: str = "offset"

    @property
    def capped(self) -> bool:
        return self.total >= count_cap(self.offset)

    @property
    def counted(self) -> int:
        """The total as shown: where the count stopped, when it did."""
        return min(self.total, count_cap(self.offset) - 1)

    @property
    def has_prev(self) -> bool:
        return self.offset > 0

    @property
    def has_next(self) -> bool:
        return self.offset + self.shown < self.total or (self.capped and self.shown > 0)

    def link(self, offset: int) -> str:
        """This screen's address with the list moved to `offset` (other lists kept)."""
        url = self.request.url.include_query_params(**{self.param: max(offset, 0)})
        return f"{url.path}?{url.query}"

    @property
    def prev_link(self) -> str:
        return self.link(self.offset - self.limit)

    @property
    def next_link(self) -> str:
        return self.link(self.offset + self.limit)

    def summary(self, t: Any, lang: str) -> str:
        """ "1–50 of 1,234" ("1,000+" when the count stopped), in the page's language
        with its digit grouping (Babel's CLDR data)."""

        def number(n: int) -> str:
            return format_decimal(n, locale=lang)

        total = number(self.counted) + ("+" if self.capped else "")
        if self.shown == 0:
            return str(t("pager.none", total=total))
        first, last = number(self.offset + 1), number(self.offset + self.shown)
        return str(t("pager.range", first=first, last=last, total=total))
