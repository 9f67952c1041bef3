"""The embedded default broker (kombu's filesystem transport), with its files written
whole: kombu creates a file under its final name and only then writes it, so a consumer
listing the folder at that moment takes the file and reads it empty or cut short (a
message lost, and a worker's error), and two processes binding to a fresh exchange both
truncate its table and write over each other (a table ending in another's bytes, which
every publish to that exchange then fails to read). Here every file appears complete, in
one rename or link, under the name a reader looks for, and an exchange's table is
changed by one process at a time."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem, virtual
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

from memoryd.files import path_written_whole

TRANSPORT = f"{__name__}:Transport"


class Channel(filesystem.Channel):
    # kombu.transport.filesystem.Channel._put, whose signature differs from its base's.
    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """Write the message under a name no consumer reads ("….msg.part": a consumer
        takes names ending "<queue>.msg"), then rename it into place."""
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = f"{final}.part"
        try:
            with open(partial, "wb") as draft:
                draft.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        row = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        with self._changing_table(exchange) as rows:
            if row not in rows:
                rows.insert(0, row)

    def _delete(
        self, queue: str, exchange: str, routing_key: str, pattern: str, *args: Any, **kwargs: Any
    ) -> None:
        virtual.Channel._delete(self, queue)  # purges it; skips kombu's in-place rewrite
        row = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        with self._changing_table(exchange) as rows:
            if row in rows:
                rows.remove(row)

    @contextmanager
    def _changing_table(self, exchange: str) -> Iterator[list[Any]]:
        """The exchange's bindings to change, read and replaced whole under a lock of
        its own (a lock on the table file itself would be left behind by the rename)."""
        path = self._exchange_file(exchange)
        self.control_folder.mkdir(exist_ok=True)
        try:
            with open(path.with_name(f".{path.name}.lock"), "ab") as guard:
                filesystem.lock(guard, filesystem.LOCK_EX)
                rows = self.get_table(exchange)
                before = list(rows)
                yield rows
                if rows != before:
                    path_written_whole(path, dumps(rows))
        except OSError as exc:
            raise ChannelError(f"Cannot change {path}") from exc


class Transport(filesystem.Transport):
    Channel = Channel

    @property
    def default_connection_params(self) -> dict[str, Any]:
        # A folder has no host: kombu's default of 'localhost' made every connection
        # warn "No hostname was supplied", twice at each worker's start.
        return {}


def filesystem_options(broker_folder: Path, queues: Sequence[str]) -> dict[str, Any]:
    """The transport options of a filesystem broker in `broker_folder`, its folders made
    and each queue's exchange file started whole; this module's Transport in use."""
    use_whole_files()
    folder = broker_folder.resolve()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)  # queued turns hold what users said
    for sub in ("queue", "processed", "control"):
        (folder / sub).mkdir(mode=0o700, exist_ok=True)
    for name in queues:
        start_exchange_file(folder / "control" / f"{name}.exchange")
    return {
        "data_folder_in": str(folder / "queue"),
        "data_folder_out": str(folder / "queue"),
        "processed_folder": str(folder / "processed"),
        "store_processed": False,
        "control_folder": str(folder / "control"),
    }


def use_whole_files() -> None:
    """filesystem:// URLs open this module's Transport from now on, in this process."""
    TRANSPORT_ALIASES["filesystem"] = TRANSPORT


def start_exchange_file(path: Path) -> None:
    """The filesystem transport creates an exchange's bindings file empty and only then
    locks and fills it: a worker starting at that moment reads "" and fails to start.
    Each exchange's file is made here whole ("no bindings yet") in one step: a temporary
    file linked into place, which fails harmlessly when the file is already there."""
    if not path.exists():
        path_written_whole(path, "[]", replace=False)
