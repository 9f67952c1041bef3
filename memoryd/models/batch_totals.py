"""The pipeline's totals: the batches kept plus what removed batches left behind.

Retention and erasure remove batch rows through `remove`, which adds the figures of the
rows it deleted to `batch_totals` (one row per status and kind: extraction or
compression, which records its runs as batches too). `batch_figures` reads both, so
totals and the Prometheus counters built on them only ever grow, while the rows read
stay bounded by `batch_retention_days`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from memoryd.models.dialect import upsert
from memoryd.models.tables import BatchStatus, BatchTotal, ExtractionBatch

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
    # The same figures per kind of batch ("extract", "compress"); kinds hold no kinds.
    kinds: dict[str, BatchFigures] = field(default_factory=dict)

    def add(
        self, kind: str, status: str, batches: int, sums: Sequence[int], last: datetime | None
    ) -> None:
        self._add(status, batches, sums, last)
        self.kinds.setdefault(kind, BatchFigures())._add(status, batches, sums, last)

    def _add(self, status: str, batches: int, sums: Sequence[int], last: datetime | None) -> None:
        self.by_status[status] += batches
        for name, value in zip(_SUMMED, sums, strict=True):
            setattr(self, name, getattr(self, name) + int(value or 0))
        if last is not None and (self.last_finished_at is None or last > self.last_finished_at):
            self.last_finished_at = last


def _grouped(session: Session) -> list[tuple[str, str, int, list[int], datetime]]:
    sums = [func.coalesce(func.sum(getattr(ExtractionBatch, n)), 0) for n in _SUMMED]
    key = (ExtractionBatch.kind, ExtractionBatch.status)
    query = select(*key, func.count(), *sums, func.max(ExtractionBatch.finished_at)).group_by(*key)
    return [(r[0], r[1], r[2], list(r[3:-1]), r[-1]) for r in session.execute(query)]


def remove(session: Session, batch_ids: Sequence[int]) -> int:
    """Delete these batches and add their figures to the totals, in one transaction:
    the figures are those of the rows this DELETE removed (RETURNING), so two removals
    racing over the same batches count each once. A batch still running counts as
    abandoned: it will never finish. Returns the rows removed."""
    if not batch_ids:
        return 0
    gone = session.execute(
        delete(ExtractionBatch)
        .where(ExtractionBatch.id.in_(list(batch_ids)))
        .returning(
            ExtractionBatch.kind,
            ExtractionBatch.status,
            *(getattr(ExtractionBatch, name) for name in _SUMMED),
            ExtractionBatch.rejections,
            ExtractionBatch.finished_at,
        )
    ).all()
    removed: dict[tuple[str, str], BatchFigures] = {}
    for row in gone:
        status = BatchStatus.ABANDONED if row.status == BatchStatus.RUNNING else row.status
        figures = removed.setdefault((status, row.kind), BatchFigures())
        figures._add(status, 1, [getattr(row, name) for name in _SUMMED], row.finished_at)
        figures.rejections.update(row.rejections or {})
    # In key order: two removals at once lock the totals rows in the same order.
    for (status, kind), figures in sorted(removed.items()):
        _add_to_total(session, status, kind, figures)
    return len(gone)


def _add_to_total(session: Session, status: str, kind: str, figures: BatchFigures) -> None:
    """Add to the totals row of (status, kind), created if missing, locked while it
    changes."""
    zeros = {"status": status, "kind": kind, "batches": 0, "rejections": {}}
    insert = upsert(session)
    values = {**zeros, **dict.fromkeys(_SUMMED, 0)}
    session.execute(insert(BatchTotal).values(**values).on_conflict_do_nothing())
    total = session.get_one(
        BatchTotal, (status, kind), with_for_update=True, populate_existing=True
    )
    total.batches += figures.by_status[status]
    for name in _SUMMED:
        setattr(total, name, getattr(total, name) + getattr(figures, name))
    total.rejections = dict(Counter(total.rejections) + figures.rejections)
    last = figures.last_finished_at
    if last is not None and (total.last_finished_at is None or last > total.last_finished_at):
        total.last_finished_at = last
    session.flush()


def batch_figures(session: Session, *, rejections: bool = True) -> BatchFigures:
    """Totals over every batch there ever was: the kept rows plus the folded totals.
    Without `rejections`, the kept rows' reasons are not read (/metrics has no use
    for them)."""
    figures = BatchFigures()
    for kind, status, batches, sums, last in _grouped(session):
        figures.add(kind, status, batches, sums, last)
    if rejections:
        kept = select(ExtractionBatch.rejections).where(ExtractionBatch.rejections.is_not(None))
        for found in session.scalars(kept):
            figures.rejections.update(found or {})
    for total in session.scalars(select(BatchTotal)):
        sums = [getattr(total, name) for name in _SUMMED]
        figures.add(total.kind, total.status, total.batches, sums, total.last_finished_at)
        figures.rejections.update(total.rejections)
    return figures
