"""memoryd: long-term memory for LLM agents, extracted asynchronously on Celery."""

from memoryd.async_client import AsyncMemoryClient
from memoryd.client import MemoryClient
from memoryd.errors import (
    DatabaseUnavailable,
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

__all__ = [
    "AsyncMemoryClient",
    "DatabaseUnavailable",
    "IngestResult",
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
