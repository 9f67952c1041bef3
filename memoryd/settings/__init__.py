"""Every setting, an environment variable `MEMORYD_<NAME>`, grouped by the stage that
reads it: each module here holds one stage's part (StorageSettings, LLMSettings…) and
`Settings` holds one of each (`settings.recall.fusion_rrf_k`), read from the
environment. A function that needs only its stage's settings takes that part, and mypy
keeps it to those; the reference of every variable is generated from the parts
(memoryd/env_example.py).

The variables keep flat names (MEMORYD_FUSION_RRF_K, not MEMORYD_RECALL__…), and
`Settings(fusion_rrf_k=3)` or `settings.updated(fusion_rrf_k=3)` take a setting by its
name too: each name belongs to exactly one part, which PART_OF records.

May import: env_names, errors, prompts.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import AliasChoices, BaseModel, Field, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from memoryd.env_names import warn_about_unknown_variables
from memoryd.errors import InvalidSettings, dotted, error_message
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
    "FIELDS",
    "PARTS",
    "PART_OF",
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

# The stages' parts, in the order the reference lists them: (attribute, heading, class).
PARTS: tuple[tuple[str, str, type[BaseModel]], ...] = (
    ("storage", "Where things live", StorageSettings),
    ("llm", "LLM", LLMSettings),
    ("ingest", "Ingest", IngestSettings),
    ("extraction", "Batching and extraction", ExtractionSettings),
    ("memories", "Tiers, weights and retention", MemorySettings),
    ("recall", "Recall", RecallSettings),
    ("agent", "Per-agent defaults", AgentDefaults),
    ("server", "Serving: HTTP, MCP, tracing", ServerSettings),
    ("maintenance", "Maintenance", MaintenanceSettings),
    ("worker", "Workers", WorkerSettings),
)

# Every setting by its name, and the part that holds it.
FIELDS: dict[str, FieldInfo] = {
    name: field for _, _, part in PARTS for name, field in part.model_fields.items()
}
PART_OF: dict[str, str] = {
    name: attribute for attribute, _, part in PARTS for name in part.model_fields
}


def _names() -> dict[str, str]:
    """Each name a setting may be given by (lower case: the environment's are read
    case-insensitively), aliases such as OPENAI_API_KEY included, to its field name."""
    names = {name: name for name in FIELDS}
    for name, field in FIELDS.items():
        if isinstance(field.validation_alias, AliasChoices):
            for alias in field.validation_alias.choices:
                if isinstance(alias, str):
                    names.setdefault(alias.lower(), name)
    return names


_NAMES = _names()
_PART_NAMES = frozenset(attribute for attribute, _, _ in PARTS)


class _Flat(BaseSettings, *(part for _, _, part in PARTS)):  # type: ignore[misc]
    """Every setting side by side, as the environment names them: only read from, by
    _FlatEnvironment, so pydantic-settings parses each variable by its field's type."""

    model_config = SettingsConfigDict(
        env_prefix="MEMORYD_", extra="ignore", populate_by_name=True, env_ignore_empty=True
    )


class _FlatEnvironment(EnvSettingsSource):
    """The MEMORYD_* variables (and the aliases), read against _Flat's fields."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(_Flat)

    def __call__(self) -> dict[str, Any]:
        return _by_field_name(super().__call__())


class _NamedArguments(PydanticBaseSettingsSource):
    """The arguments given in code, an alias (OPENAI_API_KEY=…) under its field's name:
    merged over the environment's values key by key, they must share its keys to win."""

    def __init__(self, arguments: PydanticBaseSettingsSource) -> None:
        super().__init__(arguments.settings_cls)
        self.arguments = arguments

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ reads them all at once

    def __call__(self) -> dict[str, Any]:
        return _by_field_name(self.arguments())


def _by_field_name(values: dict[str, Any]) -> dict[str, Any]:
    """`values` keyed by field name, whichever alias or case named a setting."""
    return {_NAMES.get(key.lower(), key): value for key, value in values.items()}


class Settings(BaseSettings):
    """Defaults run embedded (SQLite file + filesystem broker); production sets the two URLs."""

    # An empty variable means "not set" (docker-compose passes `FOO=` for unset values).
    model_config = SettingsConfigDict(env_prefix="MEMORYD_", extra="ignore", frozen=True)

    storage: StorageSettings = Field(default_factory=StorageSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    extraction: ExtractionSettings = Field(default_factory=ExtractionSettings)
    memories: MemorySettings = Field(default_factory=MemorySettings)
    recall: RecallSettings = Field(default_factory=RecallSettings)
    agent: AgentDefaults = Field(default_factory=AgentDefaults)
    server: ServerSettings = Field(default_factory=ServerSettings)
    maintenance: MaintenanceSettings = Field(default_factory=MaintenanceSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return _NamedArguments(init_settings), _FlatEnvironment(settings_cls)

    @model_validator(mode="before")
    @classmethod
    def _by_part(cls, values: Any) -> Any:
        return _nested(values) if isinstance(values, dict) else values

    def updated(self, **values: Any) -> Settings:
        """A copy with these settings, by name, changed (not validated again: the
        values come validated, e.g. an agent's overrides)."""
        changes: dict[str, dict[str, Any]] = {}
        for name, value in values.items():
            changes.setdefault(PART_OF[name], {})[name] = value
        parts = {a: getattr(self, a).model_copy(update=c) for a, c in changes.items()}
        return self.model_copy(update=parts)

    def value(self, name: str) -> Any:
        """One setting by its name, e.g. value("batch_size")."""
        return getattr(getattr(self, PART_OF[name]), name)

    @property
    def embeddings_on(self) -> bool:
        """An embedding model is set and reachable: a local one, or an endpoint of its own
        or the LLM's."""
        recall = self.recall
        if not recall.embedding_model:
            return False
        if recall.embedding_provider == "local":
            return True
        return bool(
            recall.embedding_base_url
            or recall.embedding_api_key
            or self.llm.llm_base_url
            or self.llm.llm_api_key
        )


def _nested(values: dict[str, Any]) -> dict[str, Any]:
    """Settings given by name ({"batch_size": 5}) sorted into their parts
    ({"extraction": {"batch_size": 5}}); a part given whole wins over names given beside
    it; unknown names are left out, as an unknown variable is."""
    nested: dict[str, Any] = {}
    for key, value in values.items():
        if key in _PART_NAMES:
            part = dict(value) if isinstance(value, BaseModel) else value
            nested[key] = {**nested.get(key, {}), **part} if isinstance(part, dict) else part
            continue
        name = _NAMES.get(key.lower())
        if name is not None:
            part_values = nested.setdefault(PART_OF[name], {})
            if isinstance(part_values, dict):
                part_values.setdefault(name, value)
    return nested


# What a list or mapping setting takes from the environment, said when it got other text.
JSON_WANTED = {
    "tuple_type": 'give a JSON array of its values, e.g. ["first", "second"]',
    "list_type": 'give a JSON array of its values, e.g. ["first", "second"]',
    "dict_type": 'give a JSON object, e.g. {"key": "value"}',
}


def explain(exc: ValidationError) -> list[str]:
    """One line per mistake, named as the environment variable a person sets."""
    lines = []
    for error in exc.errors(include_url=False, include_input=False):
        where = dotted(error)
        message = JSON_WANTED.get(error["type"]) or error_message(error)
        part, _, within = where.partition(".")
        named = within if part in _PART_NAMES else where  # e.g. memory_categories.0
        known = named.partition(".")[0] in FIELDS
        lines.append(f"MEMORYD_{named.upper()}: {message}" if known else message)
    return lines


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Settings of this process, read from the environment on first use (never at import).
    A MEMORYD_* variable that is no setting is logged first: it may be why one is wrong.
    Raises InvalidSettings naming each variable that does not validate."""
    warn_about_unknown_variables(FIELDS)
    try:
        return Settings()
    except ValidationError as exc:  # named as the variables a person sets
        raise InvalidSettings(explain(exc)) from None
