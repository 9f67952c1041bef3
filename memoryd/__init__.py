"""memoryd: long-term memory for LLM agents, extracted asynchronously on Celery."""

from memoryd.client import MemoryClient
from memoryd.errors import LLMError, MemorydError, NotFound, TurnRejected
from memoryd.models.schemas import IngestResult, TurnIn
from memoryd.settings import Settings

__all__ = [
    "IngestResult",
    "LLMError",
    "MemoryClient",
    "MemorydError",
    "NotFound",
    "Settings",
    "TurnIn",
    "TurnRejected",
]
