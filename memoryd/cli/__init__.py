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
    from memoryd.cli import launch

    args = list(sys.argv[1:] if argv is None else argv)
    if launch.launches(args):
        return launch.main(args)
    from memoryd.cli.main import main as run

    return run(args)


__all__ = ["main"]
