"""Tables, keys, payload schemas, engines and migrations: what every stage reads and writes."""

from memoryd.models.tables import (
    SHARED_USER,
    Actor,
    Base,
    BatchStatus,
    Category,
    ChatSession,
    EventKind,
    ExtractionBatch,
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
    "Base",
    "BatchStatus",
    "Category",
    "ChatSession",
    "EventKind",
    "ExtractionBatch",
    "Memory",
    "MemoryEvent",
    "MemoryStatus",
    "MemoryUsage",
    "SessionSegment",
    "Tier",
    "Turn",
    "TurnStatus",
]
