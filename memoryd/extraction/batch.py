"""One session's extraction: claim → fetch relevant memories → one LLM call → write.

No database transaction is open during the LLM call, and the batch's lease is renewed
while it runs. The write phase is one transaction: memories, events, turns done and the
batch row commit together, or not at all, and only while the batch still holds its
lease. A failure is recorded by kind: an outage (transient) backs the session off and
never counts toward dead-lettering; a permanent error or a bug counts one attempt.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from memoryd.agents import config as agent_config
from memoryd.errors import LeaseLost, LLMError, LLMTransientError
from memoryd.extraction.extractors import (
    Extractor,
    MemoryView,
    NoExtraction,
    Proposal,
    TurnView,
    cut_to_budget,
    fit_memories,
    get_extractor,
    render_profiles,
    turn_budget,
    turn_cost,
)
from memoryd.extraction.gate import gate_facts
from memoryd.ingest.heartbeat import kept_alive
from memoryd.ingest.leases import (
    Claim,
    back_off,
    claim_batch,
    clear_back_off,
    finish_turns,
    release_lease,
    renew_lease,
    return_turns,
)
from memoryd.llm import circuit
from memoryd.memories.profile_updates import apply_updates
from memoryd.memories.profiles import ensure_profiles, get_profile
from memoryd.memories.reconcile import reconcile_facts, relevant_memories
from memoryd.models.db import lease_now, lock_scope, session_scope, utcnow
from memoryd.models.keys import SessionKey
from memoryd.models.profiles import ProfileType
from memoryd.models.tables import BatchStatus, ExtractionBatch, FailureKind
from memoryd.recall import embeddings
from memoryd.settings import Settings
from memoryd.text import estimate_tokens

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
    dead_lettered: int = 0
    lost_leases: int = 0
    more_pending: bool = False
    circuit_open: bool = False
    error: str | None = None

    def as_dict(self) -> dict[str, int | bool | str | None]:
        return asdict(self)

    def add(self, done: ExtractStats) -> None:
        for name in ("batches", "turns", "created", "confirmed", "superseded", "rejected"):
            setattr(self, name, getattr(self, name) + getattr(done, name))


@dataclass
class Prepared:
    """What one LLM call needs, read while the claim's transaction was open."""

    claim: Claim
    turns: list[TurnView]
    memories: list[MemoryView]
    aliases: dict[int, int]  # prompt alias -> memory id
    profiles: dict[str, dict[str, Any]]  # the scope's documents as they are now


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
        extractor = get_extractor(settings) if settings.memory_enabled else NoExtraction()
    stats = ExtractStats()
    for _ in range(settings.extract_batches_per_task):
        prepared = _claim(settings, key, extractor, stats)
        if prepared is None:
            return stats
        claim = prepared.claim
        started = time.perf_counter()
        try:
            with kept_alive(settings, _renewal(settings, claim), f"batch-{claim.batch_id}"):
                proposal = extractor.extract(
                    prepared.turns, prepared.memories, profiles=prepared.profiles
                )
        except LLMTransientError as exc:
            kind = FailureKind.TRANSIENT
            _fail(settings, stats, claim, kind, str(exc), clock(), llm_down=extractor.uses_llm)
            return stats  # the session backs off; the sweeper tries it again later
        except LLMError as exc:
            _fail(settings, stats, claim, FailureKind.PERMANENT, str(exc), clock())
            return stats
        except Exception as exc:
            # A bug, not an LLM fault: free the lease now instead of after lease_seconds,
            # count the attempt (so a poison batch dead-letters), and let the task fail.
            error = f"unexpected {type(exc).__name__}: {exc}"
            _fail(settings, stats, claim, FailureKind.BUG, error, clock())
            raise
        proposal.duration_ms = proposal.duration_ms or (time.perf_counter() - started) * 1000

        try:
            with session_scope(settings) as session:
                done = apply_proposal(
                    session, settings, prepared, proposal, clock(), extractor.uses_llm
                )
        except LeaseLost as exc:
            log.warning("%s", exc)
            stats.lost_leases += 1
            return stats
        except OperationalError as exc:
            # The database went away mid-write, or picked this transaction as a deadlock
            # victim: nothing was written, and it is nobody's fault: retry soon.
            error = f"database error while writing: {exc}".splitlines()[0]
            _fail(settings, stats, claim, FailureKind.TRANSIENT, error, clock())
            return stats
        except Exception as exc:
            # The write transaction rolled back; record the failure, then fail the task.
            error = f"unexpected {type(exc).__name__}: {exc}"
            _fail(settings, stats, claim, FailureKind.BUG, error, clock())
            raise
        stats.add(done)
        if done.created:
            embeddings.fill_missing(settings, key.scope)  # no-op unless embeddings are on
    stats.more_pending = True
    return stats


def _claim(
    settings: Settings, key: SessionKey, extractor: Extractor, stats: ExtractStats
) -> Prepared | None:
    """Claim the next batch and read what its prompt shows, in one transaction. None when
    nothing is due, another worker holds the session, or the LLM circuit is open."""
    with session_scope(settings) as session:
        now = lease_now(session)
        state = circuit.read(session) if extractor.uses_llm else None
        if state is not None and state.is_open(now, settings):
            stats.circuit_open = True
            return None
        budget = turn_budget(settings)
        claim = claim_batch(session, settings, key, now, token_budget=budget, cost=turn_cost)
        if claim is None:
            return None
        if state is not None and state.is_half_open(now, settings):
            if not circuit.take_probe(session, settings, state, now):
                session.rollback()  # another worker is probing the endpoint
                stats.circuit_open = True
                return None
            log.warning("LLM circuit half-open: batch %s probes the endpoint", claim.batch_id)
        turns = [TurnView(t.role, t.content, t.created_at) for t in claim.turns]
        if claim.oversized:
            turns = [cut_to_budget(turns[0], budget)]
            session.execute(
                update(ExtractionBatch)
                .where(ExtractionBatch.id == claim.batch_id)
                .values(truncated_turns=1)
            )
            log.warning("turn %s is over the prompt budget: extracting its head", claim.turns[0].id)
        batch_text = "\n".join(t.content for t in turns)
        shown = relevant_memories(session, key.scope, batch_text, settings.prefetch_limit)
        documents = {
            kind.value: get_profile(session, key.scope, kind, now).content for kind in ProfileType
        }
        # The profiles and the memories shown share extract_memory_tokens of the prompt.
        left = settings.extract_memory_tokens - estimate_tokens(
            render_profiles(documents, settings)
        )
        views = [MemoryView(i, m.category, m.name, m.content) for i, m in enumerate(shown, 1)]
        views = fit_memories(views, left)
        aliases = {v.alias: shown[v.alias - 1].id for v in views}
    return Prepared(claim, turns, views, aliases, documents)


def _renewal(settings: Settings, claim: Claim) -> Callable[[Session, datetime], bool]:
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
    facts = [*proposal.facts, *(e.as_fact() for e in proposal.experiences)]
    accepted, rejected = gate_facts(facts, settings)
    accepted = agent_config.keep_categories(settings, accepted, rejected)  # per-agent
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
    )
    profile_updates, profile_rejected = apply_updates(
        session,
        settings,
        claim.key.scope,
        proposal.profile_updates,
        said_at,
        now,
        batch_id=claim.batch_id,
    )
    rejected.update({f"profile_{reason}": n for reason, n in profile_rejected.items()})
    if finish_turns(session, claim) != len(claim.turns):
        raise LeaseLost(f"batch {claim.batch_id}: its turns are no longer claimed by it")
    clear_back_off(session, claim.key)
    if used_llm:
        circuit.record_success(session, now)
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
            facts_proposed=len(facts),
            facts_accepted=len(accepted),
            facts_rejected=sum(rejected.values()),
            rejections=dict(rejected) or None,
            memories_created=counts.created,
            memories_confirmed=counts.confirmed,
            memories_superseded=counts.superseded,
            profile_updates=profile_updates,
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
    session: Session,
    settings: Settings,
    claim: Claim,
    kind: FailureKind,
    error: str,
    now: datetime,
    llm_down: bool = False,
) -> int:
    """Record a failed batch and give its turns back. Returns how many were dead-lettered.

    Transient: the turns return unchanged and the session backs off (and with `llm_down`
    the LLM circuit counts the failure). Permanent or bug: each turn counts one attempt.
    """
    if not release_lease(session, claim):
        return 0  # the lease was lost: its turns went back already
    transient = kind == FailureKind.TRANSIENT
    dead = return_turns(session, settings, claim.key, claim.batch_id, count_attempt=not transient)
    if transient:
        back_off(session, settings, claim.key, lease_now(session))
        if llm_down:
            circuit.record_failure(session, settings, lease_now(session))
    session.execute(
        update(ExtractionBatch)
        .where(ExtractionBatch.id == claim.batch_id)
        .values(status=BatchStatus.FAILED, error=error[:2000], error_kind=kind, finished_at=now)
    )
    return dead


def _fail(
    settings: Settings,
    stats: ExtractStats,
    claim: Claim,
    kind: FailureKind,
    error: str,
    now: datetime,
    llm_down: bool = False,
) -> None:
    """fail_batch in a transaction of its own; if even that fails (database down), the
    lease runs out and the sweeper returns the turns, so nothing is lost either way."""
    log.warning("batch %s of %s failed (%s): %s", claim.batch_id, claim.key, kind, error)
    stats.failed_batches += 1
    stats.error = f"{kind}: {error}"
    try:
        with session_scope(settings) as session:
            dead = fail_batch(session, settings, claim, kind, error, now, llm_down)
    except Exception:
        log.exception("could not record the failure of batch %s", claim.batch_id)
        return
    stats.dead_lettered += dead
    if dead:
        log.error(
            "%d turns of %s dead-lettered after %d attempts; `memoryd retry` re-drives them",
            dead,
            claim.key,
            settings.max_attempts,
        )
