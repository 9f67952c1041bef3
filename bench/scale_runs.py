"""What the scaling bench (bench/scale.py) measures: a run's size, its batches and
figures. Its own module, so the bench and its report (scale_report.py) import it, and
not each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from bench.chaos_harness import Outcome
from bench.usage import CpuUse

LLM_SECONDS = 2.0
SAME_TASK = 5.0  # seconds: a session's next batch claimed sooner was its task's next


@dataclass(frozen=True)
class Size:
    users: int
    sessions: int  # per user
    turns: int  # per session
    settle_seconds: float
    concurrency: int = 4  # threads of each host's worker (--concurrency; see below)

    @property
    def chats(self) -> int:
        return self.users * self.sessions


class Span(NamedTuple):
    """A done batch: its session, its claim and the start of its write, in seconds after
    the run's first claim (the database's clock and the worker's: one clock here)."""

    session: str
    start: float
    end: float


@dataclass
class Run:
    hosts: int
    slots: int  # hosts x concurrency
    pooled: bool
    outcome: Outcome
    turns: int  # extracted by done batches
    spans: list[Span]  # the done batches, oldest first
    fed: float  # seconds the feeder took
    cpu: CpuUse  # from the feed's start until settled
    pool_wait: float | None = None  # seconds clients waited for PgBouncer's connections
    connections: int = 0  # the most PostgreSQL held for the run's database at once

    @property
    def window(self) -> float:
        """Seconds from the first batch claimed to the last one's write."""
        return max(s.end for s in self.spans) if self.spans else 0.0

    @property
    def msgs_per_s(self) -> float:
        return self.turns / self.window if self.window > 0 else 0.0

    @property
    def batch_seconds(self) -> float:
        """A batch's mean time from its claim to the start of its write (2 s of it the
        LLM call; the write's own statements come after)."""
        return sum(s.end - s.start for s in self.spans) / max(len(self.spans), 1)

    @property
    def write_seconds(self) -> float:
        """From a batch's write to the next claim of its session, on average: the
        write's statements and the next claim, when one task ran both."""
        last: dict[str, Span] = {}
        gaps = []
        for span in self.spans:
            before = last.get(span.session)
            if before is not None and 0 <= span.start - before.end < SAME_TASK:
                gaps.append(span.start - before.end)
            last[span.session] = span
        return sum(gaps) / len(gaps) if gaps else 0.0

    @property
    def slots_busy(self) -> float:
        """The share of the slots' time spent in a batch (the rest: waiting for work)."""
        busy = sum(s.end - s.start for s in self.spans)
        return busy / (self.slots * self.window) if self.window > 0 else 0.0

    @property
    def of_bound(self) -> float:
        """msg/s against every slot busy with nothing but a 2 s call, all the time."""
        bound = self.slots * self.turns / max(len(self.spans), 1) / LLM_SECONDS
        return self.msgs_per_s / bound if bound else 0.0

    @property
    def cores(self) -> float:
        """Cores' worth of CPU the run's own processes used while it extracted."""
        return sum(self.cpu.used.values()) / self.window if self.window > 0 else 0.0
