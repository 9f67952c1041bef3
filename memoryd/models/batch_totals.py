"""The pipeline's totals: the batches kept plus what removed batches left behind.

Retention and erasure remove batch rows; before they do, `fold` adds each row's figures
to `batch_totals` (one row per status). `batch_figures` reads both, so totals and the
Prometheus counters built on them only ever grow, while the rows read stay bounded by
`batch_retention_days`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from memoryd.models.tables import BatchTotal, ExtractionBatch

_SUMMED = ("llm_calls", "tokens_in", "tokens_out", "facts_proposed", "facts_accepted")


@dataclass
class BatchFigures:
    by_status: Counter[str] = field(default_factory=Counter)
    llm_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    facts_proposed: int = 0
    facts_accepted: int = 0
    rejections: Counter[str] = field(default_factory=Counter)  # reason -> facts
    last_finished_at: datetime | None = None

    def add(self, status: str, batches: int, sums: Sequence[int], last: datetime | None) -> None:
        self.by_status[status] += batches
        for name, value in zip(_SUMMED, sums, strict=True):
            setattr(self, name, getattr(self, name) + int(value or 0))
        if last is not None and (self.last_finished_at is None or last > self.last_finished_at):
            self.last_finished_at = last


def _grouped(
    session: Session, *where: ColumnElement[bool]
) -> list[tuple[str, int, list[int], datetime]]:
    sums = [func.coalesce(func.sum(getattr(ExtractionBatch, n)), 0) for n in _SUMMED]
    query = (
        select(ExtractionBatch.status, func.count(), *sums, func.max(ExtractionBatch.finished_at))
        .where(*where)
        .group_by(ExtractionBatch.status)
    )
    return [(row[0], row[1], list(row[2:-1]), row[-1]) for row in session.execute(query)]


def _rejections(session: Session, *where: ColumnElement[bool]) -> list[tuple[str, dict[str, int]]]:
    query = select(ExtractionBatch.status, ExtractionBatch.rejections).where(
        ExtractionBatch.rejections.is_not(None), *where
    )
    return [(status, reasons or {}) for status, reasons in session.execute(query)]


def fold(session: Session, batch_ids: Sequence[int]) -> None:
    """Add these batches' figures to the totals, in the transaction that removes them.
    The totals rows are locked as they are updated, so retention and an erasure
    folding at once both count."""
    if not batch_ids:
        return
    chosen = ExtractionBatch.id.in_(list(batch_ids))
    reasons: dict[str, Counter[str]] = {}
    for status, found in _rejections(session, chosen):
        reasons.setdefault(status, Counter()).update(found)
    for status, batches, sums, last in _grouped(session, chosen):
        total = session.get(BatchTotal, status, with_for_update=True)
        if total is None:
            total = BatchTotal(status=status, batches=0, rejections={}, **dict.fromkeys(_SUMMED, 0))
            session.add(total)
        total.batches += batches
        for name, value in zip(_SUMMED, sums, strict=True):
            setattr(total, name, getattr(total, name) + int(value or 0))
        total.rejections = dict(Counter(total.rejections) + reasons.get(status, Counter()))
        if last is not None and (total.last_finished_at is None or last > total.last_finished_at):
            total.last_finished_at = last
    session.flush()


def batch_figures(session: Session) -> BatchFigures:
    """Totals over every batch there ever was: the kept rows plus the folded totals."""
    figures = BatchFigures()
    for status, batches, sums, last in _grouped(session):
        figures.add(status, batches, sums, last)
    for _status, found in _rejections(session):
        figures.rejections.update(found)
    for total in session.scalars(select(BatchTotal)):
        sums = [getattr(total, name) for name in _SUMMED]
        figures.add(total.status, total.batches, sums, total.last_finished_at)
        figures.rejections.update(total.rejections)
    return figures
