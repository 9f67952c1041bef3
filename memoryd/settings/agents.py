"""Per-agent defaults: each agent may override them (memoryd/agents)."""

from __future__ import annotations

from pydantic import Field, field_validator

from memoryd.settings.part import Part


class AgentDefaults(Part):
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
