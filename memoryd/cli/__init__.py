"""The `memoryd` command line and the embedded demo; run by people and deploy scripts.

May import: client, errors, extraction, ingest, llm, mcp, memories, models, monitoring,
recall, server, settings, worker.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """The `memoryd` command. A worker or beat starts without the rest of the command
    line's imports, which would only slow each start (memoryd/cli/launch.py)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["worker"], ["beat"]):
        from memoryd.cli.launch import main as launch

        return launch(args)
    from memoryd.cli.main import main as run

    return run(args)


__all__ = ["main"]
