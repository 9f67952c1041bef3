"""Write receipts: where a turn handed to memoryd stands, by the key its sender gave it.

pending (stored, waiting for its batch), claimed (a worker is extracting its batch),
done (extracted: the memories it produced are listed), failed (dead-lettered, kept and
re-drivable) or skipped (a dead letter given up on). Enqueue never waits; a caller that
needs a turn's memories before going on polls this, or waits on it
(MemoryClient.wait_extracted, `GET /v1/turns/…?wait=`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta

from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.orm import Session

from memoryd.models.base import TurnStatus
from memoryd.models.conversation_tables import Turn
from memoryd.models.keys import Scope
from memoryd.models.tables import Memory

CLOCK_SKEW = timedelta(minutes=10)
# A turn in one of these states will not change by itself: waiting ends there.
SETTLED = frozenset({TurnStatus.DONE, TurnStatus.FAILED, TurnStatus.SKIPPED})


class TurnReceipt(BaseModel):
    """Where one turn stands, and what it produced."""

    agent_id: str
    user_id: str
    turn_key: str
    turn_id: int
    session_id: str
    status: TurnStatus
    # The memories extracted from the batch that held it (done only), oldest first: a
    # batch's memories name all its turns as their sources.
    memory_ids: list[int]

    @property
    def settled(self) -> bool:
        return self.status in SETTLED


def all_settled(found: Sequence[TurnReceipt]) -> bool:
    """Whether every turn found is settled: waiting is over. A key no turn holds is not
    waited for (a caller waits after its enqueue returned)."""
    return all(r.settled for r in found)


def receipts(session: Session, scope: Scope, turn_keys: Iterable[str]) -> list[TurnReceipt]:
    """The receipts of the scope's turns with these keys, in the keys' order; a key no
    turn of the scope holds is left out."""
    keys = list(dict.fromkeys(turn_keys))
    if not keys:
        return []
    rows = session.execute(select(Turn).where(Turn.of(scope), Turn.turn_key.in_(keys))).scalars()
    turns = {t.turn_key: t for t in rows}
    produced = _produced(session, scope, [t for t in turns.values() if t.status == "done"])
    return [
        TurnReceipt(
            agent_id=scope.agent_id,
            user_id=scope.user_id,
            turn_key=key,
            turn_id=turn.id,
            session_id=turn.session_id,
            status=TurnStatus(turn.status),
            memory_ids=produced.get(turn.id, []),
        )
        for key in keys
        if (turn := turns.get(key)) is not None
    ]


def _produced(session: Session, scope: Scope, done: list[Turn]) -> dict[int, list[int]]:
    """Memory ids by the done turn they came from: the scope's memories written since the
    first of those turns arrived, whatever their status now, read by their sources."""
    if not done:
        return {}
    wanted = {t.id for t in done}
    # Minus a margin: the memory's time is the worker's clock, the turn's the API host's.
    since = min(t.received_at for t in done) - CLOCK_SKEW
    rows = session.execute(
        select(Memory.id, Memory.source_turn_ids)
        .where(Memory.of(scope), Memory.updated_at >= since)
        .order_by(Memory.id)
    )
    found: dict[int, list[int]] = {}
    for memory_id, sources in rows:
        for turn_id in set(sources or ()) & wanted:
            found.setdefault(turn_id, []).append(memory_id)
    return found
