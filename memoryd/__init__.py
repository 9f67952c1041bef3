"""memoryd: long-term memory for LLM agents, extracted asynchronously on Celery.

The names below load on first use (PEP 562): a worker, beat or a CLI command imports
only the parts it runs, not the clients it never calls."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memoryd.async_client import AsyncMemoryClient
    from memoryd.client import MemoryClient
    from memoryd.errors import (
        DatabaseUnavailable,
        InvalidSettings,
        LLMError,
        MemorydError,
        MemoryRejected,
        NotFound,
        ProfileRejected,
        SharedScopeError,
        TurnRejected,
    )
    from memoryd.models.profiles import ProfileOut, ProfileType
    from memoryd.models.schemas import IngestResult, TurnIn
    from memoryd.settings import Settings

# Each public name and the module that defines it.
_HOMES = {
    "AsyncMemoryClient": "memoryd.async_client",
    "MemoryClient": "memoryd.client",
    "DatabaseUnavailable": "memoryd.errors",
    "InvalidSettings": "memoryd.errors",
    "LLMError": "memoryd.errors",
    "MemorydError": "memoryd.errors",
    "MemoryRejected": "memoryd.errors",
    "NotFound": "memoryd.errors",
    "ProfileRejected": "memoryd.errors",
    "SharedScopeError": "memoryd.errors",
    "TurnRejected": "memoryd.errors",
    "ProfileOut": "memoryd.models.profiles",
    "ProfileType": "memoryd.models.profiles",
    "IngestResult": "memoryd.models.schemas",
    "TurnIn": "memoryd.models.schemas",
    "Settings": "memoryd.settings",
}

__all__ = [  # the names of _HOMES
    "AsyncMemoryClient",
    "DatabaseUnavailable",
    "IngestResult",
    "InvalidSettings",
    "LLMError",
    "MemoryClient",
    "MemoryRejected",
    "MemorydError",
    "NotFound",
    "ProfileOut",
    "ProfileRejected",
    "ProfileType",
    "Settings",
    "SharedScopeError",
    "TurnIn",
    "TurnRejected",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'memoryd' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
