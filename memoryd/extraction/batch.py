"""One session's extraction: claim → fetch relevant memories → one LLM call → write.

No database transaction is open during the LLM call. The write phase is one transaction:
memories, events, turns done and the batch row commit together, or not at all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime

from sqlalchemy import update
from sqlalchemy.orm import Session

from memoryd.errors import LeaseLost, LLMError
from memoryd.extraction.extractors import Extractor, MemoryView, Proposal, TurnView, get_extractor
from memoryd.extraction.gate import gate_facts
from memoryd.ingest.leases import Claim, claim_batch, finish_turns, release_lease, return_turns
from memoryd.memories.reconcile import reconcile_facts, relevant_memories
from memoryd.models.db import lock_scope, session_scope, utcnow
from memoryd.models.keys import Scope, SessionKey
from memoryd.models.tables import BatchStatus, ExtractionBatch
from memoryd.recall import embeddings
from memoryd.settings import Settings

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]


@dataclass
class ExtractStats:
    batches: int = 0
    turns: int = 0
    created: int = 0
    confirmed: int = 0
    superseded: int = 0
    rejected: int = 0
    failed_batches: int = 0
    lost_leases: int = 0
    more_pending: bool = False

    def as_dict(self) -> dict[str, int | bool]:
        return asdict(self)


def apply_proposal(
    session: Session,
    settings: Settings,
    claim: Claim,
    proposal: Proposal,
    aliases: dict[int, int],
    now: datetime,
) -> ExtractStats:
    """Write a batch's outcome. Raises LeaseLost (caller rolls back) if our lease is gone."""
    if not release_lease(session, claim):
        raise LeaseLost(f"batch {claim.batch_id}: lease lost, another worker redoes it")
    scope = Scope(claim.key.agent_id, claim.key.user_id)
    lock_scope(session, scope.agent_id, scope.user_id)
    accepted, rejected = gate_facts(proposal.facts, settings)
    counts = reconcile_facts(
        session,
        settings,
        scope,
        accepted,
        aliases,
        now,
        batch_id=claim.batch_id,
        source_turn_ids=[t.id for t in claim.turns],
        metadata={"extractor": proposal.extractor},
    )
    finish_turns(session, claim)
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
            facts_proposed=len(proposal.facts),
            facts_accepted=len(accepted),
            facts_rejected=sum(rejected.values()),
            rejections=dict(rejected) or None,
            memories_created=counts.created,
            memories_confirmed=counts.confirmed,
            memories_superseded=counts.superseded,
            finished_at=now,
            duration_ms=proposal.duration_ms,
        )
    )
    return ExtractStats(
        batches=1,
        turns=len(claim.turns),
        created=counts.created,
        confirmed=counts.confirmed,
        superseded=counts.superseded,
        rejected=sum(rejected.values()),
    )


def fail_batch(
    session: Session, settings: Settings, claim: Claim, error: str, now: datetime
) -> int:
    """Record the failure; turns go back to pending (or dead letter). Returns dead-lettered."""
    if not release_lease(session, claim):
        return 0  # the reaper already returned these turns
    dead = return_turns(session, settings, claim.key, claim.batch_id)
    session.execute(
        update(ExtractionBatch)
        .where(ExtractionBatch.id == claim.batch_id)
        .values(status=BatchStatus.FAILED, error=error[:2000], finished_at=now)
    )
    return dead


def extract_session(
    settings: Settings,
    key: SessionKey,
    *,
    extractor: Extractor | None = None,
    clock: Clock = utcnow,
) -> ExtractStats:
    """Process up to `extract_batches_per_task` batches of one session, oldest first."""
    extractor = extractor or get_extractor(settings)
    stats = ExtractStats()
    scope = Scope(key.agent_id, key.user_id)
    for _ in range(settings.extract_batches_per_task):
        with session_scope(settings) as session:
            claim = claim_batch(session, settings, key, clock())
            if claim is None:
                session.rollback()
                return stats
            batch_text = "\n".join(t.content for t in claim.turns)
            shown = relevant_memories(session, scope, batch_text, settings.prefetch_limit)
            views = [MemoryView(i, m.category, m.name, m.content) for i, m in enumerate(shown, 1)]
            aliases = {i: m.id for i, m in enumerate(shown, 1)}

        started = time.perf_counter()
        try:
            proposal = extractor.extract([TurnView(t.role, t.content) for t in claim.turns], views)
        except LLMError as exc:
            log.warning("batch %s of %s failed: %s", claim.batch_id, key, exc)
            _fail_promptly(settings, claim, str(exc), clock())
            stats.failed_batches += 1
            return stats  # the sweeper retries later: no hot loop against a failing LLM
        except Exception as exc:
            # A bug, not an LLM fault: free the lease now instead of after lease_seconds,
            # count the attempt (so a poison batch dead-letters), and let the task fail loudly.
            _fail_promptly(settings, claim, f"unexpected {type(exc).__name__}: {exc}", clock())
            raise
        proposal.duration_ms = proposal.duration_ms or (time.perf_counter() - started) * 1000

        try:
            with session_scope(settings) as session:
                done = apply_proposal(session, settings, claim, proposal, aliases, clock())
        except LeaseLost as exc:
            log.warning("%s", exc)
            stats.lost_leases += 1
            return stats
        except Exception as exc:
            # The write transaction rolled back; the same goes for a failure while applying.
            _fail_promptly(settings, claim, f"unexpected {type(exc).__name__}: {exc}", clock())
            raise
        for field in ("batches", "turns", "created", "confirmed", "superseded", "rejected"):
            setattr(stats, field, getattr(stats, field) + getattr(done, field))
        if done.created:
            embeddings.fill_missing(settings, scope)  # no-op unless embeddings are on
    stats.more_pending = True
    return stats


def _fail_promptly(settings: Settings, claim: Claim, error: str, now: datetime) -> None:
    """fail_batch in a transaction of its own; if even that fails, the lease runs out and
    the sweeper returns the turns, so nothing is lost either way."""
    try:
        with session_scope(settings) as session:
            dead = fail_batch(session, settings, claim, error, now)
    except Exception:
        log.exception("could not record the failure of batch %s", claim.batch_id)
        return
    if dead:
        log.error(
            "%d turns of %s dead-lettered after %d attempts; `memoryd retry` re-drives them",
            dead,
            claim.key,
            settings.max_attempts,
        )
