"""The embedded default broker (kombu's filesystem transport), with its files written
whole: kombu creates a file under its final name and only then writes it, so a consumer
listing the folder at that moment takes the file and reads it empty or cut short (a
message lost, and a worker's error). Here every file appears complete, in one rename or
link, under the name a consumer looks for."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

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


class Transport(filesystem.Transport):
    Channel = Channel


def filesystem_options(broker_folder: Path, queues: Sequence[str]) -> dict[str, Any]:
    """The transport options of a filesystem broker in `broker_folder`, its folders made
    and each queue's exchange file started whole; this module's Transport in use."""
    use_whole_files()
    folder = broker_folder.resolve()
    for sub in ("queue", "processed", "control"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
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
    if path.exists():
        return
    draft = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    draft.write_text("[]")
    try:
        os.link(draft, path)
    except FileExistsError:
        pass
    finally:
        draft.unlink()
