"""The `memoryd` command line and the embedded demo; run by people and deploy scripts."""

from memoryd.cli.main import main

__all__ = ["main"]
