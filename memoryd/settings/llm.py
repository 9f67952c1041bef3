"""The LLM: any OpenAI-compatible endpoint, its models and the extraction prompt."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, field_validator

from memoryd.settings import checks
from memoryd.settings.part import Part


class LLMSettings(Part):
    llm_api_key: str | None = Field(
        None,
        validation_alias=AliasChoices("MEMORYD_LLM_API_KEY", "OPENAI_API_KEY"),
        description="The LLM endpoint's key (OPENAI_API_KEY too)",
    )
    llm_base_url: str | None = Field(
        None,
        validation_alias=AliasChoices("MEMORYD_LLM_BASE_URL", "OPENAI_BASE_URL"),
        description="Any OpenAI-compatible endpoint (OPENAI_BASE_URL too); unset: OpenAI's "
        "own when a key is set, else offline",
    )
    extraction_model: str = Field(
        "gpt-4o-mini", description="Model that extracts facts from a batch"
    )
    summary_model: str = Field("gpt-4o-mini", description="Model that summarises long sessions")
    llm_response_format: Literal["json_schema", "json_object"] = Field(
        "json_schema",
        description="'json_schema' sends the answer's schema; 'json_object' where unsupported",
    )
    llm_timeout_seconds: float = Field(60.0, gt=0, description="One LLM call's timeout")
    llm_retries: int = Field(4, ge=0, description="Retries of a transient LLM error")
    llm_backoff_max_seconds: float = Field(
        30.0,
        gt=0,
        description="Longest wait of the backoff between LLM retries (a server's Retry-After "
        "is waited as asked, up to 120 s)",
    )
    llm_temperature: float = Field(
        0.0, ge=0, le=2, description="Sampling temperature of every LLM call"
    )
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

    @field_validator("llm_base_url")
    @classmethod
    def _llm_url(cls, value: str | None) -> str | None:
        return checks.http_url(value)

    @field_validator("extract_prompt")
    @classmethod
    def _prompt_exists(cls, value: str) -> str:
        from memoryd.prompts import load_prompt

        try:
            load_prompt(value)
        except FileNotFoundError:
            raise ValueError(f"no prompt {value}.md in memoryd/prompts") from None
        return value

    @property
    def llm_configured(self) -> bool:
        return not self.offline_extractor and bool(self.llm_api_key or self.llm_base_url)
