"""A circuit breaker for the LLM endpoint, shared by every worker through the database.

Closed: calls go out. After `circuit_failure_threshold` consecutive transient failures
(each one a batch whose retries were exhausted) it opens for `circuit_open_seconds`,
doubling with every further failure up to `circuit_open_max_seconds`; nobody calls and
the sweeper dispatches nothing. Once that time has passed it is half-open: the first
caller to take the probe slot (a compare-and-set) makes one call, and its outcome
closes the circuit or opens it again for longer. Every state change is one row.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from memoryd.models.db import rowcount
from memoryd.models.dialect import upsert
from memoryd.models.tables import Circuit
from memoryd.settings import ExtractionSettings

log = logging.getLogger(__name__)

LLM = "llm"


@dataclass(frozen=True)
class CircuitState:
    failures: int
    open_until: datetime | None

    def tripped(self, settings: ExtractionSettings) -> bool:
        return self.failures >= settings.circuit_failure_threshold

    def is_open(self, now: datetime, settings: ExtractionSettings) -> bool:
        """No call may go out now."""
        return self.tripped(settings) and self.open_until is not None and self.open_until > now

    def is_half_open(self, now: datetime, settings: ExtractionSettings) -> bool:
        """One probe may go out now."""
        return self.tripped(settings) and not self.is_open(now, settings)


def read(session: Session, name: str = LLM) -> CircuitState:
    row = session.execute(
        select(Circuit.failures, Circuit.open_until).where(Circuit.name == name)
    ).first()
    return CircuitState(row.failures, row.open_until) if row else CircuitState(0, None)


def take_probe(
    session: Session,
    settings: ExtractionSettings,
    state: CircuitState,
    now: datetime,
    name: str = LLM,
) -> bool:
    """In the half-open state, become the one caller that probes the endpoint. Moves
    `open_until` on by one open period, so another probe goes only if this one never
    reports back (its worker died)."""
    res = session.execute(
        update(Circuit)
        .where(
            Circuit.name == name,
            Circuit.failures == state.failures,
            Circuit.open_until == state.open_until
            if state.open_until is not None
            else Circuit.open_until.is_(None),
        )
        .values(open_until=now + timedelta(seconds=settings.circuit_open_seconds), updated_at=now)
    )
    return rowcount(res) == 1


def record_failure(
    session: Session, settings: ExtractionSettings, now: datetime, name: str = LLM
) -> None:
    """One more consecutive transient failure; opens (or re-opens, for longer) the
    circuit from the threshold on."""
    insert = upsert(session)
    failures: int = session.execute(
        insert(Circuit)
        .values(name=name, failures=1, open_until=None, updated_at=now)
        .on_conflict_do_update(
            index_elements=[Circuit.name],
            set_={"failures": Circuit.failures + 1, "updated_at": now},
        )
        .returning(Circuit.failures)
    ).scalar_one()
    beyond = failures - settings.circuit_failure_threshold
    if beyond >= 0:
        seconds = min(
            settings.circuit_open_seconds * 2 ** min(beyond, 20), settings.circuit_open_max_seconds
        )
        session.execute(
            update(Circuit)
            .where(Circuit.name == name)
            .values(open_until=now + timedelta(seconds=seconds))
        )
        log.warning(
            "LLM circuit open for %.0f s after %d consecutive transient failures",
            seconds,
            failures,
        )


def record_success(session: Session, now: datetime, name: str = LLM) -> bool:
    """A call succeeded: close the circuit. Writes only when it was not closed already, so
    the common case takes no lock on the shared row. Whether this call closed it."""
    res = session.execute(
        update(Circuit)
        .where(Circuit.name == name, Circuit.failures > 0)
        .values(failures=0, open_until=None, updated_at=now)
    )
    if not rowcount(res):
        return False
    log.warning("LLM circuit closed: the endpoint answers again")
    return True
