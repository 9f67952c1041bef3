"""The `memoryd` command line and the embedded demo; run by people and deploy scripts.

May import: client, errors, extraction, ingest, llm, mcp, memories, models, monitoring,
recall, server, settings, worker.
"""

from memoryd.cli.main import main

__all__ = ["main"]
