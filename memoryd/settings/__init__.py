"""Every setting, an environment variable `MEMORYD_<NAME>`, grouped by the stage that
reads it: each module here holds one stage's part (StorageSettings, LLMSettings…) and
`Settings` is all of them at once, read from the environment. A function that needs
only its stage's settings takes that part, and mypy keeps it to those; the reference of
every variable is generated from the parts (memoryd/env_example.py).

May import: env_names, errors, prompts.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from memoryd.env_names import warn_about_unknown_variables
from memoryd.errors import field_errors
from memoryd.settings.agents import AgentDefaults
from memoryd.settings.checks import BROKER_SCHEMES, masked_url
from memoryd.settings.extraction import ExtractionSettings
from memoryd.settings.ingest import IngestSettings
from memoryd.settings.llm import LLMSettings
from memoryd.settings.maintenance import MaintenanceSettings
from memoryd.settings.memories import MemorySettings
from memoryd.settings.recall import RecallSettings
from memoryd.settings.server import ServerSettings
from memoryd.settings.storage import StorageSettings
from memoryd.settings.worker import WorkerSettings

__all__ = [
    "BROKER_SCHEMES",
    "PARTS",
    "AgentDefaults",
    "ExtractionSettings",
    "IngestSettings",
    "LLMSettings",
    "MaintenanceSettings",
    "MemorySettings",
    "RecallSettings",
    "ServerSettings",
    "Settings",
    "StorageSettings",
    "WorkerSettings",
    "explain",
    "get_settings",
    "masked_url",
]

# The stages' parts, in the order the reference lists them, each with its heading.
PARTS: tuple[tuple[str, type[BaseModel]], ...] = (
    ("Where things live", StorageSettings),
    ("LLM", LLMSettings),
    ("Ingest", IngestSettings),
    ("Batching and extraction", ExtractionSettings),
    ("Tiers, weights and retention", MemorySettings),
    ("Recall", RecallSettings),
    ("Per-agent defaults", AgentDefaults),
    ("Serving: HTTP, MCP, tracing", ServerSettings),
    ("Maintenance", MaintenanceSettings),
    ("Workers", WorkerSettings),
)


class Settings(
    BaseSettings,
    WorkerSettings,
    MaintenanceSettings,
    ServerSettings,
    AgentDefaults,
    RecallSettings,
    MemorySettings,
    ExtractionSettings,
    IngestSettings,
    LLMSettings,
    StorageSettings,
):
    """Defaults run embedded (SQLite file + filesystem broker); production sets the two URLs."""

    # An empty variable means "not set" (docker-compose passes `FOO=` for unset values).
    model_config = SettingsConfigDict(
        env_prefix="MEMORYD_",
        extra="ignore",
        frozen=True,
        populate_by_name=True,
        env_ignore_empty=True,
    )

    @property
    def embeddings_on(self) -> bool:
        """An embedding model is set and reachable: a local one, or an endpoint of its own
        or the LLM's."""
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


def explain(exc: ValidationError) -> list[str]:
    """One line per mistake, named as the environment variable a person sets."""
    return [f"MEMORYD_{f.upper()}: {m}" if f else m for f, m in field_errors(exc)]


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Settings of this process, read from the environment on first use (never at import).
    A MEMORYD_* variable that is no setting is logged first: it may be why one is wrong."""
    warn_about_unknown_variables(Settings.model_fields)
    return Settings()
