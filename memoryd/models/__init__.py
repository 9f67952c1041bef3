"""Tables, keys, payload schemas, engines and migrations: what every stage reads and writes.

May import: errors, ids, settings, text, zones.
"""

from memoryd.models.tables import (
    SHARED_USER,
    Actor,
    AgentConfig,
    ApiKey,
    Base,
    BatchStatus,
    Category,
    ChatSession,
    Circuit,
    ConflictReview,
    EventKind,
    ExtractionBatch,
    FailureKind,
    Memory,
    MemoryEvent,
    MemoryStatus,
    MemoryUsage,
    SessionSegment,
    Tier,
    Turn,
    TurnStatus,
)

__all__ = [
    "SHARED_USER",
    "Actor",
    "AgentConfig",
    "ApiKey",
    "Base",
    "BatchStatus",
    "Category",
    "ChatSession",
    "Circuit",
    "ConflictReview",
    "EventKind",
    "ExtractionBatch",
    "FailureKind",
    "Memory",
    "MemoryEvent",
    "MemoryStatus",
    "MemoryUsage",
    "SessionSegment",
    "Tier",
    "Turn",
    "TurnStatus",
]
