"""`MemoryClient`'s write receipts: where turns stand after enqueue, and waiting on them
for a caller that needs a turn's memories before it goes on (enqueue itself never waits)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from memoryd.ingest.receipts import TurnReceipt, all_settled, receipts
from memoryd.models.db import session_scope
from memoryd.models.keys import Scope
from memoryd.settings import Settings

WAIT_POLL_SECONDS = 0.2  # a status read: the turns by key, the memories of the done ones


class ReceiptMethods:
    settings: Settings

    def turn_status(self, agent_id: str, user_id: str, turn_key: str) -> TurnReceipt | None:
        """Where the scope's turn with this `turn_key` stands (pending, claimed, done,
        failed, skipped) and, once done, the memories it produced; None for no such turn."""
        found = self.turn_statuses(agent_id, user_id, [turn_key])
        return found[0] if found else None

    def turn_statuses(
        self, agent_id: str, user_id: str, turn_keys: Sequence[str]
    ) -> list[TurnReceipt]:
        """turn_status of many keys in one read, in their order (unknown keys left out)."""
        with session_scope(self.settings.storage, readonly=True) as session:
            return receipts(session, Scope(agent_id, user_id), turn_keys)

    def wait_extracted(
        self, agent_id: str, user_id: str, turn_keys: Sequence[str], timeout: float = 30.0
    ) -> list[TurnReceipt]:
        """The turns' receipts once each is settled (done, failed or skipped), or as they
        stand when `timeout` seconds have passed: check `receipt.settled`. Keys that no
        turn of the scope holds are left out, and not waited for."""
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            found = self.turn_statuses(agent_id, user_id, turn_keys)
            if all_settled(found) or time.monotonic() >= deadline:
                return found
            time.sleep(min(WAIT_POLL_SECONDS, max(deadline - time.monotonic(), 0.0)))
