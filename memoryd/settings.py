"""The one settings class. Every knob is an environment variable `MEMORYD_<NAME>`."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from memoryd import settings_checks as checks
from memoryd.env_names import warn_about_unknown_variables
from memoryd.errors import field_errors
from memoryd.settings_checks import BROKER_SCHEMES, masked_url

__all__ = ["BROKER_SCHEMES", "Settings", "explain", "get_settings", "masked_url"]


class Settings(BaseSettings):
    """Defaults run embedded (SQLite file + filesystem broker); production sets the two URLs."""

    # An empty variable means "not set" (docker-compose passes `FOO=` for unset values).
    model_config = SettingsConfigDict(
        env_prefix="MEMORYD_",
        extra="ignore",
        frozen=True,
        populate_by_name=True,
        env_ignore_empty=True,
    )

    # --- where things live -------------------------------------------------------------
    data_dir: Path = Field(Path(".memoryd"), description="Embedded SQLite file and broker folder")
    database_url: str = Field("", description="SQLAlchemy URL; empty means <data_dir>/memoryd.db")
    db_statement_timeout_seconds: float = Field(
        120.0, ge=0, description="PostgreSQL: a statement running longer fails (0: no limit)"
    )
    db_lock_timeout_seconds: float = Field(
        15.0, ge=0, description="PostgreSQL: waiting longer for a lock fails (0: no limit)"
    )
    db_pool_size: int = Field(
        10, ge=1, description="PostgreSQL connections each process keeps open (per engine)"
    )
    db_max_overflow: int = Field(
        20, ge=0, description="PostgreSQL connections a busy process may open beyond those"
    )
    db_transaction_pooler: bool = Field(
        False,
        description="PostgreSQL is reached through a transaction-pooling PgBouncer: no "
        "prepared statements, timeouts set in each transaction, no session-level locks",
    )
    broker_url: str = Field(
        "filesystem://", description="Celery broker; filesystem:// needs no server"
    )
    result_backend: str | None = None

    # --- LLM (any OpenAI-compatible endpoint) ----------------------------------------
    llm_api_key: str | None = Field(
        None, validation_alias=AliasChoices("MEMORYD_LLM_API_KEY", "OPENAI_API_KEY")
    )
    llm_base_url: str | None = Field(
        None, validation_alias=AliasChoices("MEMORYD_LLM_BASE_URL", "OPENAI_BASE_URL")
    )
    extraction_model: str = "gpt-4o-mini"
    summary_model: str = "gpt-4o-mini"
    llm_response_format: Literal["json_schema", "json_object"] = "json_schema"
    llm_timeout_seconds: float = Field(60.0, gt=0)
    llm_retries: int = Field(4, ge=0, description="Retries of a transient LLM error")
    llm_backoff_max_seconds: float = Field(30.0, gt=0)
    llm_temperature: float = Field(0.0, ge=0, le=2)
    llm_max_tokens: int = Field(
        2048, ge=0, description="Longest answer asked of the model (a small one may loop); 0: unset"
    )
    extract_prompt: str = Field(
        "extract.v4",
        pattern=r"^extract\.[a-z0-9.\-]+$",
        description="The extraction prompt (memoryd/prompts); extract.small.v2 suits small models",
    )
    small_model_checks: bool = Field(
        False,
        description="Check a small model's answer harder: its confidence against what the user "
        "said, its replaces/same_as against the memory's words, its `single` against the keys "
        "known to hold one value (home city, employer…)",
    )
    offline_extractor: bool = Field(
        False, description="Force the rule-based extractor even when an LLM is configured"
    )

    # --- ingest limits ------------------------------------------------------------------
    max_turn_chars: int = Field(32_000, gt=0)
    max_bulk_turns: int = Field(10_000, gt=0)
    max_metadata_bytes: int = Field(16_384, gt=0, description="A turn's metadata as JSON")
    max_clock_skew_seconds: float = Field(
        300,
        ge=0,
        description="How far a turn's timestamp may be ahead of the database clock",
    )

    # --- batching and extraction (names follow the seed config) ---------------------
    batch_size: int = Field(20, ge=1, description="Turns per extraction batch (10 exchanges)")
    max_facts: int = Field(10, ge=1)
    min_confidence: float = Field(0.6, ge=0, le=1)
    long_term_confidence: float = Field(0.85, ge=0, le=1)
    min_fact_chars: int = Field(4, ge=1)
    max_fact_chars: int = Field(500, ge=1)
    near_duplicate_similarity: float = Field(0.85, gt=0, le=1)
    prefetch_limit: int = Field(20, ge=0, description="Existing memories shown to the extractor")
    flush_idle_seconds: int = Field(300, ge=1)
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
    retry_backoff_max_seconds: float = Field(20.0, gt=0)
    circuit_failure_threshold: int = Field(
        5, ge=1, description="Consecutive transient LLM failures that open the circuit"
    )
    circuit_open_seconds: float = Field(10.0, gt=0, description="First open period; doubles")
    circuit_open_max_seconds: float = Field(10.0, gt=0)
    extract_batches_per_task: int = Field(
        5, ge=1, description="Batches one task runs before yielding"
    )

    # --- tiers and weights ------------------------------------------------------------
    short_ttl_days: float = Field(7.0, gt=0)
    followup_ttl_days: float = Field(3.0, gt=0)
    mood_ttl_days: float = Field(1.0, gt=0)
    half_life_short_days: float = Field(7.0, gt=0)
    half_life_long_days: float = Field(90.0, gt=0)
    archive_threshold: float = Field(0.1, ge=0)
    turn_retention_days: float = Field(
        90.0, ge=0, description="Days extracted turns are kept (once summarised); 0: forever"
    )
    usage_retention_days: float = Field(
        90.0, ge=0, description="Days each recall's usage rows are kept; 0: forever"
    )
    batch_retention_days: float = Field(
        30.0, ge=0, description="Days finished extraction batches are kept; 0: forever"
    )
    deleted_retention_days: float = Field(
        30.0, ge=0, description="Days a deleted memory can be restored before its text is purged"
    )
    # Archiving already means long unused (a new fact left alone decays to the threshold
    # in 299 days by default), so a further year to restore it is ample.
    archived_retention_days: float = Field(
        365.0,
        ge=0,
        description="Days an archived memory (unused for months: decayed below "
        "archive_threshold) can be restored before it is purged; 0: forever",
    )
    promote_access_count: int = Field(3, ge=1)
    reinforce_retrieved: float = Field(0.05, ge=0)
    reinforce_referenced: float = Field(0.15, ge=0)
    reinforce_observed: float = Field(0.3, ge=0)

    # --- recall ranking ---------------------------------------------------------------
    recall_min_similarity: float = Field(
        0.3,
        ge=0,
        le=1,
        description="Least trigram word similarity that counts as a match (in a scope of up"
        " to 200 memories; a larger one matches by word prefixes)",
    )
    fusion_rrf_k: float = Field(
        5.0, gt=0, description="Reciprocal rank constant: smaller favours the top ranks"
    )
    fusion_weight_keyword: float = Field(1.0, ge=0, description="BM25 list's share in fusion")
    fusion_weight_trigram: float = Field(0.5, ge=0, description="Trigram list's share")
    fusion_weight_embedding: float = Field(1.0, ge=0, description="Embedding list's share")
    rank_weight_match: float = Field(1.0, ge=0)
    # Strength is mostly recall's own reinforcement (every returned memory gains weight),
    # a prior about the memory, not evidence about this query: it should break near-ties
    # between matches, not overturn a better one. At 0.15 memories returned ~20 times
    # more outranked the better-matching one (BM25's k1 then 0.8: MADial-Bench English,
    # local vectors, 0.875; with 0.05, 0.887 and no dataset of bench/quality.py below its
    # 0.15 figure by more than 0.3 points of hit@5; reinforcement off instead cost RealMem
    # 0.6 points).
    rank_weight_strength: float = Field(0.05, ge=0)
    rank_weight_recency: float = Field(0.1, ge=0)
    rank_weight_confidence: float = Field(0.1, ge=0)
    # A question naming a memory's subject key ("who is my team lead?", "我的组长是谁")
    # wants that key's memories: a match of that weight outranks most keyword ranks.
    rank_weight_key: float = Field(0.3, ge=0)
    # A "when" question wants dated episodes, "how should you reply?" feedback and
    # procedures, a question naming a person that person's memories (recall/intent.py).
    rank_weight_intent: float = Field(0.2, ge=0)
    recency_half_life_days: float = Field(30.0, gt=0)
    referenced_similarity: float = Field(
        0.5, gt=0, le=1, description="Share of a memory's distinctive terms a reply must use"
    )
    embedding_provider: Literal["openai", "local"] = Field(
        "openai", description="'openai': any OpenAI-compatible endpoint; 'local': on this host"
    )
    embedding_model: str | None = Field(
        None,
        description="Model name ('openai'); 'multilingual-e5-small' (the bundled e5, extra "
        "'multilingual') or a sentence-transformers path or installed package ('local'); "
        "unset means no embeddings",
    )
    embedding_base_url: str | None = Field(None, description="Defaults to the LLM's")
    embedding_api_key: str | None = Field(None, description="Defaults to the LLM's")
    embedding_min_similarity: float = Field(
        0.2, ge=-1, le=1, description="Least cosine that counts as a match"
    )
    embedding_query_cache: int = Field(
        1024, ge=0, description="Query vectors kept in memory, so a repeat costs no call"
    )
    embedding_max_attempts: int = Field(
        3,
        ge=1,
        description="Fills that may fail on one memory's text before it is left out "
        "(until its text changes); counted as refused in stats",
    )
    embedding_cache_mb: float = Field(
        256,
        ge=0,
        description="Scope vectors each process keeps in memory (MB); the scopes recalled "
        "least recently go first, and a scope larger than this is read on every recall",
    )
    rerank: Literal["off", "endpoint", "cross-encoder"] = Field(
        "off",
        description="Rerank the fused list's head: 'endpoint' (POST {MEMORYD_RERANK_URL}"
        "/rerank) or 'cross-encoder' (a sentence-transformers model from a local path)",
    )
    rerank_url: str | None = Field(None, description="Base URL of a rerank API, e.g. .../v1")
    rerank_model: str | None = Field(
        None, description="Model name sent to the endpoint, or the cross-encoder's path"
    )
    rerank_api_key: str | None = Field(None, description="Bearer key of the rerank endpoint")
    rerank_top_n: int = Field(20, ge=2, le=200, description="Fused hits the reranker orders")
    rerank_timeout: float = Field(
        2.0, gt=0, le=60, description="Seconds a rerank may take before the fused order stands"
    )

    # --- per-agent defaults (each agent may override them: memoryd/agents) ------------
    memory_enabled: bool = Field(True, description="Extract and inject memories at all")
    context_token_budget: int = Field(800, ge=1, description="Default build_context budget")
    memory_categories: tuple[str, ...] | None = Field(
        None, description="Categories extracted and recalled; unset means all"
    )
    inject_min_score: float = Field(0.0, ge=0, description="Hits under it stay out of context")
    inject_max_items: int | None = Field(None, ge=1, description="Most memories in a context")
    inject_tiers: tuple[str, ...] | None = Field(
        None, description="Tiers a context may use (e.g. only long); unset means both"
    )
    # Seed 003 §3.3's injection rules: whether a block is built at all, and from what.
    inject_first_round_empty: bool = Field(
        False, description="No context block before the session's first reply (needs session_id)"
    )
    inject_min_query_length: int = Field(
        0, ge=0, description="Queries shorter than this (characters) get no context block"
    )
    inject_long_term_triggers: tuple[str, ...] | None = Field(
        None, description="When set, long-tier memories are injected only for queries naming one"
    )
    recall_pending: bool = Field(
        True,
        description="Recall and context also show the scope's user turns not yet extracted "
        "that match, marked pending",
    )

    # --- HTTP server (memoryd serve) ----------------------------------------------------
    max_request_bytes: int = Field(16 * 1024 * 1024, ge=1024, description="Largest HTTP body")
    page_session_hours: float = Field(
        12.0, gt=0, le=24 * 30, description="How long a page sign-in lasts"
    )
    dev_mode: bool = Field(
        False,
        description="Development server: the page's cookie works over plain HTTP (not Secure)",
    )
    api_key_cache_seconds: float = Field(
        5.0, ge=0, description="How long a looked-up API key is trusted (revocation delay)"
    )
    auth_failure_limit: int = Field(
        20,
        ge=0,
        description="Wrong keys a client address may try per minute before 429 (0: no limit)",
    )

    # --- MCP server (memoryd mcp) -------------------------------------------------------
    # A Settings field, not a variable of its own, so it is validated and listed with the
    # rest; repr=False keeps the secret out of logged or printed settings.
    mcp_key: str | None = Field(
        None,
        repr=False,
        description="API key `memoryd mcp` acts with over stdio (memoryd keys create); "
        "over HTTP each client sends its own",
    )

    # --- tracing ------------------------------------------------------------------------
    tracing: bool = Field(
        False,
        description="OpenTelemetry spans (pip install 'memoryd[otel]'); OTEL_* variables "
        "choose the exporter",
    )

    # --- sessions -----------------------------------------------------------------------
    compress_trigger_tokens: int = Field(4000, ge=1)
    keep_recent_turns: int = Field(10, ge=0)

    # --- beat intervals (seconds) -------------------------------------------------------
    sweep_interval_seconds: float = Field(15.0, gt=0)
    maintenance_interval_seconds: float = Field(3600.0, gt=0)
    compress_interval_seconds: float = Field(600.0, gt=0)

    # --- Celery worker ------------------------------------------------------------------
    worker_concurrency: int = Field(16, ge=1)
    consumer_watchdog_seconds: float = Field(
        120.0, ge=0, description="A worker receiving nothing this long pings itself; 0 = off"
    )
    startup_wait_seconds: float = Field(
        30.0, ge=0, description="How long a worker or `migrate` waits for the database"
    )
    task_soft_time_limit_seconds: float = Field(
        600.0,
        gt=0,
        description="A task past this starts no new batch; a batch it interrupts (prefork "
        "pool) gives its turns back without counting an attempt",
    )
    task_time_limit_seconds: float = Field(
        660.0,
        gt=0,
        description="Past this the prefork pool kills a task's process; its lease then "
        "lapses and another worker takes the turns",
    )

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str) -> str:
        return checks.database_url(value)

    @field_validator("broker_url")
    @classmethod
    def _broker_url(cls, value: str) -> str:
        return checks.broker_url(value)

    @field_validator("llm_base_url", "embedding_base_url", "rerank_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return checks.http_url(value)

    @field_validator("tracing")
    @classmethod
    def _tracing_installed(cls, value: bool) -> bool:
        return checks.tracing_installed(value)

    @field_validator("memory_categories")
    @classmethod
    def _known_categories(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        known = ("user", "project", "feedback", "reference", "episode", "procedure")
        unknown = [c for c in value or [] if c not in known]
        if unknown:
            raise ValueError(f"unknown categories {unknown}; known: {', '.join(known)}")
        return value

    @field_validator("inject_tiers")
    @classmethod
    def _known_tiers(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if any(t not in ("short", "long") for t in value or []):
            raise ValueError(f"tiers are short and long, got {value}")
        return value

    @field_validator("inject_long_term_triggers")
    @classmethod
    def _triggers(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None and not all(t.strip() for t in value):
            raise ValueError("a trigger keyword is blank")
        return value

    @field_validator("extract_prompt")
    @classmethod
    def _prompt_exists(cls, value: str) -> str:
        from memoryd.prompts import load_prompt

        try:
            load_prompt(value)
        except FileNotFoundError:
            raise ValueError(f"no prompt {value}.md in memoryd/prompts") from None
        return value

    @model_validator(mode="after")
    def _check_confidence_order(self) -> Settings:
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
        if self.task_time_limit_seconds <= self.task_soft_time_limit_seconds:
            raise ValueError(
                "MEMORYD_TASK_TIME_LIMIT_SECONDS must be above "
                "MEMORYD_TASK_SOFT_TIME_LIMIT_SECONDS, so a task can stop on its own first"
            )
        if self.rerank == "endpoint" and not self.rerank_url:
            raise ValueError("MEMORYD_RERANK=endpoint needs MEMORYD_RERANK_URL")
        if self.rerank == "cross-encoder" and not self.rerank_model:
            raise ValueError("MEMORYD_RERANK=cross-encoder needs MEMORYD_RERANK_MODEL, a path")
        return self

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'memoryd.db'}"

    @property
    def llm_configured(self) -> bool:
        return not self.offline_extractor and bool(self.llm_api_key or self.llm_base_url)

    @property
    def embeddings_on(self) -> bool:
        if not self.embedding_model:
            return False
        if self.embedding_provider == "local":
            return True
        return bool(
            self.embedding_base_url
            or self.embedding_api_key
            or self.llm_base_url
            or self.llm_api_key
        )

    @property
    def broker_folder(self) -> Path:
        return self.data_dir / "broker"


def explain(exc: ValidationError) -> list[str]:
    """One line per mistake, named as the environment variable a person sets."""
    return [f"MEMORYD_{f.upper()}: {m}" if f else m for f, m in field_errors(exc)]


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Settings of this process, read from the environment on first use (never at import).
    A MEMORYD_* variable that is no setting is logged first: it may be why one is wrong."""
    warn_about_unknown_variables(Settings.model_fields)
    return Settings()
