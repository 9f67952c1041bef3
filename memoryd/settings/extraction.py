"""Batching and extraction: batches, leases, the gate, retries and the LLM circuit.
(Names follow the seed config.)"""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from memoryd.settings.part import Part


class ExtractionSettings(Part):
    batch_size: int = Field(20, ge=1, description="Turns per extraction batch (10 exchanges)")
    max_facts: int = Field(10, ge=1, description="Most facts kept from one batch")
    min_confidence: float = Field(
        0.6, ge=0, le=1, description="Facts below this confidence are dropped (the gate)"
    )
    long_term_confidence: float = Field(
        0.85,
        ge=0,
        le=1,
        description="Lasting facts at or above it start long-term; below, short-term",
    )
    min_fact_chars: int = Field(4, ge=1, description="Shorter facts are dropped")
    max_fact_chars: int = Field(500, ge=1, description="Longer facts are dropped")
    near_duplicate_similarity: float = Field(
        0.85,
        gt=0,
        le=1,
        description="Trigram similarity at which a fact confirms an existing memory",
    )
    prefetch_limit: int = Field(20, ge=0, description="Existing memories shown to the extractor")
    flush_idle_seconds: int = Field(
        300, ge=1, description="A session idle this long has its partial batch extracted"
    )
    # A live batch renews its lease every third of it (ingest/heartbeat.py), so it can
    # be short: a killed worker's turns are back in work within lease + sweep interval.
    lease_seconds: float = Field(
        20, gt=0, description="A batch whose worker stops renewing this long is taken back"
    )
    max_attempts: int = Field(
        3,
        ge=1,
        description="Permanent failures (4xx, invalid output, bugs) of a turn alone in its batch "
        "before it is dead-lettered; a failing batch of several is split first",
    )
    max_lost_leases: int = Field(
        10, ge=1, description="Worker deaths on one batch before its turns are dead-lettered"
    )
    extract_max_prompt_tokens: int = Field(
        8000, ge=500, description="Upper bound of an extraction prompt (local estimate)"
    )
    extract_memory_tokens: int = Field(
        1500, ge=0, description="Part of the prompt for the memories shown to the extractor"
    )
    retry_backoff_seconds: float = Field(
        15.0, gt=0, description="First wait after a transient failure; doubles per failure"
    )
    # Outages are the circuit's to detect: a session's own back-off stays short, so
    # extraction resumes within about 30 s of the endpoint answering again.
    retry_backoff_max_seconds: float = Field(
        20.0, gt=0, description="Longest wait before a failed batch is tried again"
    )
    circuit_failure_threshold: int = Field(
        5, ge=1, description="Consecutive transient LLM failures that open the circuit"
    )
    circuit_open_seconds: float = Field(10.0, gt=0, description="First open period; doubles")
    circuit_open_max_seconds: float = Field(
        10.0, gt=0, description="Longest the LLM circuit stays open at a time"
    )
    extract_batches_per_task: int = Field(
        5, ge=1, description="Batches one task runs before yielding"
    )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.long_term_confidence < self.min_confidence:
            raise ValueError(
                "MEMORYD_LONG_TERM_CONFIDENCE must be >= MEMORYD_MIN_CONFIDENCE "
                f"(got {self.long_term_confidence} < {self.min_confidence})"
            )
        if self.max_fact_chars < self.min_fact_chars:
            raise ValueError("MEMORYD_MAX_FACT_CHARS must be >= MEMORYD_MIN_FACT_CHARS")
        if self.extract_memory_tokens >= self.extract_max_prompt_tokens // 2:
            raise ValueError(
                "MEMORYD_EXTRACT_MEMORY_TOKENS must be under half of "
                "MEMORYD_EXTRACT_MAX_PROMPT_TOKENS, so turns keep most of the prompt"
            )
        return self
