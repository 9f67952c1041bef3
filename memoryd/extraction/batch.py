"""One session's extraction: claim → show related memories → one LLM call → write.

No database transaction is open during the LLM call, and the batch's lease is renewed
while it runs. The write phase is one transaction: memories, events, turns done and the
batch row commit together, or not at all, and only while the batch still holds its
lease. A failure is recorded by kind: an outage (transient) backs the session off and
never counts toward dead-lettering; a permanent error or a bug counts one attempt.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from sqlalchemy import update
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session

from memoryd import tracing
from memoryd.agents import config as agent_config
from memoryd.errors import (
    DatabaseUnavailable,
    LeaseLost,
    LLMEndpointError,
    LLMError,
    LLMTransientError,
    error_text,
)
from memoryd.extraction import prepare
from memoryd.extraction.extractors import NoExtraction, get_extractor
from memoryd.extraction.failures import record_failure
from memoryd.extraction.gate import gate_facts, keep_categories
from memoryd.extraction.prepare import Prepared
from memoryd.extraction.resolve import resolve
from memoryd.extraction.views import Extractor, Proposal
from memoryd.ingest.heartbeat import kept_alive
from memoryd.ingest.leases import Claim, finish_turns, release_lease, renew_lease
from memoryd.llm import circuit
from memoryd.memories.profile_updates import apply_updates
from memoryd.memories.profiles import ensure_profiles
from memoryd.memories.reconcile import ReconcileCounts, reconcile_facts
from memoryd.models import key_index
from memoryd.models.coordination import lock_scope
from memoryd.models.db import session_scope, utcnow
from memoryd.models.keys import SessionKey
from memoryd.models.tables import BatchStatus, ExtractionBatch, FailureKind
from memoryd.settings import ExtractionSettings, Settings

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
# Failures of reaching the database, not of the batch: never counted as an attempt.
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError, PoolTimeout, DatabaseUnavailable)
# The prefork pool interrupted the batch at the task's soft time limit: nobody's fault.
TIME_LIMIT = "stopped at the task's soft time limit"


@dataclass
class ExtractStats:
    batches: int = 0
    turns: int = 0
    created: int = 0
    confirmed: int = 0
    superseded: int = 0
    rejected: int = 0
    failed_batches: int = 0
    dead_lettered: int = 0
    lost_leases: int = 0
    more_pending: bool = False
    circuit_open: bool = False
    circuit_closed: bool = False  # this task's call ended an outage: others may go now
    error: str | None = None

    def as_dict(self) -> dict[str, int | bool | str | None]:
        return asdict(self)

    def failures(self) -> dict[str, int]:
        """The failure figures: a failed batch's own, as the task stops at it."""
        return {k: getattr(self, k) for k in ("failed_batches", "dead_lettered", "lost_leases")}

    def add(self, done: ExtractStats) -> None:
        for name in ("batches", "turns", "created", "confirmed", "superseded", "rejected"):
            setattr(self, name, getattr(self, name) + getattr(done, name))
        self.circuit_closed |= done.circuit_closed


def extract_session(
    settings: Settings,
    key: SessionKey,
    *,
    extractor: Extractor | None = None,
    clock: Clock = utcnow,
) -> ExtractStats:
    """Process up to `extract_batches_per_task` batches of one session, oldest first."""
    # Per-agent memory settings (memoryd/agents): prefetch, categories, memory on or off.
    settings = agent_config.extraction_settings(settings, key.agent_id)
    if extractor is None:
        extractor = get_extractor(settings) if settings.agent.memory_enabled else NoExtraction()
    stats = ExtractStats()
    # No batch starts that its LLM calls, at their longest, could carry past the soft
    # limit: the prefork pool would cut it off there, its call wasted.
    longest_call = settings.llm.llm_timeout_seconds * (settings.llm.llm_retries + 1)
    stop_at = time.monotonic() + settings.worker.task_soft_time_limit_seconds - longest_call
    for _ in range(settings.extraction.extract_batches_per_task):
        prepared = prepare.claim(settings, key, extractor)
        if isinstance(prepared, prepare.Refusal):
            stats.circuit_open = prepared.circuit_open
            return stats
        with tracing.span(settings, "memoryd.extract_batch", **_ids(prepared.claim)) as span:
            proposal = _propose(settings, prepared, extractor, stats, clock)
            done = (
                _write(settings, prepared, proposal, extractor, stats, clock) if proposal else None
            )
            tracing.record(span, done or stats.failures())
        if done is None:
            return stats
        stats.add(done)
        if time.monotonic() >= stop_at:
            break  # a task stays within its time limit in every pool: the rest goes on anew
    stats.more_pending = True
    return stats


def _ids(claim: Claim) -> dict[str, Any]:
    """A batch span's attributes: ids and a count, nothing users said."""
    return {**vars(claim.key), "batch_id": claim.batch_id, "turns": len(claim.turns)}


def _propose(
    settings: Settings,
    prepared: Prepared,
    extractor: Extractor,
    stats: ExtractStats,
    clock: Clock,
) -> Proposal | None:
    """The batch's LLM phase, its lease kept alive: what the prompt shows, the call, and
    the settling of unshown memories. None when it failed (recorded in `stats`)."""
    claim = prepared.claim
    started = time.perf_counter()
    try:
        with kept_alive(settings, _renewal(settings.extraction, claim), f"batch-{claim.batch_id}"):
            prepare.show(settings, prepared)
            proposal = extractor.extract(
                prepared.turns, prepared.memories, profiles=prepared.profiles, keys=prepared.keys
            )
            resolve(settings, prepared, proposal, extractor)
    except (LLMTransientError, LLMEndpointError) as exc:
        # An endpoint refusing every request (a revoked key, a model or path that is not
        # there) is an outage too: no turn's fault, so none is dead-lettered for it.
        kind = FailureKind.TRANSIENT
        _fail(settings, stats, claim, kind, str(exc), clock(), llm_down=extractor.uses_llm)
        return None  # the session backs off; the sweeper tries it again later
    except LLMError as exc:
        _fail(settings, stats, claim, FailureKind.PERMANENT, str(exc), clock())
        return None
    except SoftTimeLimitExceeded:
        _fail(settings, stats, claim, FailureKind.TRANSIENT, TIME_LIMIT, clock())
        return None
    except DATABASE_UNAVAILABLE as exc:
        # The database went away while the prompt's memories were read: nobody's fault.
        error = f"database error while reading: {error_text(exc)}"
        _fail(settings, stats, claim, FailureKind.TRANSIENT, error, clock())
        return None
    except Exception as exc:
        # A bug, not an LLM fault: free the lease now instead of after lease_seconds,
        # count the attempt (so a poison batch dead-letters), and let the task fail.
        error = f"unexpected {error_text(exc)}"
        _fail(settings, stats, claim, FailureKind.BUG, error, clock())
        raise
    proposal.duration_ms = proposal.duration_ms or (time.perf_counter() - started) * 1000
    return proposal


def _write(
    settings: Settings,
    prepared: Prepared,
    proposal: Proposal,
    extractor: Extractor,
    stats: ExtractStats,
    clock: Clock,
) -> ExtractStats | None:
    """The batch's write phase in one transaction. None when it wrote nothing (a lost
    lease or a failure, recorded in `stats`)."""
    try:
        with session_scope(settings.storage) as session:
            return apply_proposal(
                session, settings, prepared, proposal, clock(), extractor.uses_llm
            )
    except LeaseLost as exc:
        log.warning("%s", exc)
        stats.lost_leases += 1
        return None
    except SoftTimeLimitExceeded:
        _fail(settings, stats, prepared.claim, FailureKind.TRANSIENT, TIME_LIMIT, clock())
        return None
    except DATABASE_UNAVAILABLE as exc:
        # The database went away mid-write, or picked this transaction as a deadlock
        # victim: nothing was written, and it is nobody's fault: retry soon.
        error = f"database error while writing: {error_text(exc)}"
        _fail(settings, stats, prepared.claim, FailureKind.TRANSIENT, error, clock())
        return None
    except Exception as exc:
        # The write transaction rolled back; record the failure, then fail the task.
        error = f"unexpected {error_text(exc)}"
        _fail(settings, stats, prepared.claim, FailureKind.BUG, error, clock())
        raise


def _renewal(settings: ExtractionSettings, claim: Claim) -> Callable[[Session, datetime], bool]:
    def renew(session: Session, now: datetime) -> bool:
        return renew_lease(session, settings, claim.key, claim.batch_id, now)

    return renew


def apply_proposal(
    session: Session,
    settings: Settings,
    prepared: Prepared,
    proposal: Proposal,
    now: datetime,
    used_llm: bool = False,
) -> ExtractStats:
    """Write a batch's outcome. Raises LeaseLost (caller rolls back) if our lease is gone."""
    claim = prepared.claim
    if not release_lease(session, claim):
        raise LeaseLost(f"batch {claim.batch_id}: lease lost, its turns went back to pending")
    lock_scope(session, claim.key.scope)
    ensure_profiles(session, claim.key.scope, now)  # both documents, from the first batch on
    written = _write_memories(session, settings, prepared, proposal, now)
    if finish_turns(session, settings.maintenance, claim) != len(claim.turns):
        raise LeaseLost(f"batch {claim.batch_id}: its turns are no longer claimed by it")
    closed = used_llm and circuit.record_success(session, now)
    _record_done(session, claim, proposal, written.figures(), now)
    return ExtractStats(
        batches=1,
        turns=len(claim.turns),
        created=written.counts.created,
        confirmed=written.counts.confirmed,
        superseded=written.counts.superseded,
        rejected=sum(written.rejected.values()),
        circuit_closed=closed,
    )


@dataclass
class _Written:
    """What a batch's write did with the facts and profile updates it was given."""

    proposed: int
    accepted: int
    rejected: Counter[str]  # by reason, profile updates' as profile_<reason>
    counts: ReconcileCounts
    profile_updates: int

    def figures(self) -> dict[str, Any]:
        """The batch row's columns of it."""
        return {
            "facts_proposed": self.proposed,
            "facts_accepted": self.accepted,
            "facts_rejected": sum(self.rejected.values()),
            "rejections": dict(self.rejected) or None,
            "memories_created": self.counts.created,
            "memories_confirmed": self.counts.confirmed,
            "memories_superseded": self.counts.superseded,
            "profile_updates": self.profile_updates,
        }


def _write_memories(
    session: Session, settings: Settings, prepared: Prepared, proposal: Proposal, now: datetime
) -> _Written:
    """Gate the proposed facts, reconcile the kept ones with the scope's memories, and
    apply the profile updates, under the scope's lock."""
    claim = prepared.claim
    facts = [*proposal.facts, *(e.as_fact() for e in proposal.experiences)]
    accepted, rejected = gate_facts(facts, settings.extraction)
    rejected.update(proposal.dropped)
    accepted = keep_categories(settings.agent, accepted, rejected)  # per-agent
    said_at = max(t.created_at for t in claim.turns)  # when the user said it
    counts = reconcile_facts(
        session,
        settings,
        claim.key.scope,
        accepted,
        prepared.aliases,
        now,
        batch_id=claim.batch_id,
        source_turn_ids=[t.id for t in claim.turns],
        metadata={"extractor": proposal.extractor},
        said_at=said_at,
        nearby=prepared.nearby,
        refused=rejected,
    )
    profile_updates, profile_rejected = apply_updates(
        session,
        settings.extraction,
        claim.key.scope,
        proposal.profile_updates,
        said_at,
        now,
        batch_id=claim.batch_id,
    )
    rejected.update({f"profile_{reason}": n for reason, n in profile_rejected.items()})
    for alias, key in prepared.new_aliases.items():
        key_index.add_alias(session, claim.key.scope, alias, key, now)
    dropped = sum(n for reason, n in proposal.dropped.items() if not reason.startswith("profile_"))
    return _Written(len(facts) + dropped, len(accepted), rejected, counts, profile_updates)


def _record_done(
    session: Session, claim: Claim, proposal: Proposal, figures: dict[str, Any], now: datetime
) -> None:
    """The batch row of a written batch: what was asked, what it cost, what it did."""
    session.execute(
        update(ExtractionBatch)
        .where(ExtractionBatch.id == claim.batch_id)
        .values(
            status=BatchStatus.DONE,
            extractor=proposal.extractor,
            model=proposal.model,
            prompt_version=proposal.prompt_version,
            tokens_in=proposal.tokens_in,
            tokens_out=proposal.tokens_out,
            llm_calls=proposal.llm_calls,
            finished_at=now,
            duration_ms=proposal.duration_ms,
            **figures,
        )
    )


def _fail(
    settings: Settings,
    stats: ExtractStats,
    claim: Claim,
    kind: FailureKind,
    error: str,
    now: datetime,
    llm_down: bool = False,
) -> None:
    """The failure recorded (failures.record_failure) and counted in `stats`."""
    log.warning("batch %s of %s failed (%s): %s", claim.batch_id, claim.key, kind, error)
    stats.failed_batches += 1
    stats.error = f"{kind}: {error}"
    dead = record_failure(settings, claim, kind, error, now, llm_down)
    if dead is None:
        return
    stats.dead_lettered += dead
    if kind != FailureKind.TRANSIENT and len(claim.turns) > 1:
        stats.more_pending = True  # split: the next claim tries the first half at once
