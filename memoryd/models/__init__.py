"""Tables, enums and the migration entry point."""

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
