"""The command line's argument parser, kept apart from the commands' imports so that
`memoryd worker` and `memoryd beat` (memoryd/cli/launch.py) use it at no cost."""

from __future__ import annotations

import argparse
from typing import Any


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Each option's help ends with its default, where it has one to show: not for a
    flag, a required option, or one that is unset unless given (None or '')."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        default = action.default
        if action.required or default is None or default is False or default == "":
            return action.help
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """An argument parser whose help shows defaults; its subcommands' parsers are too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def port(value: str) -> int:
    """A TCP port to listen on, 1 to 65535: argparse names the option when it is not."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if not 1 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"not a port (1 to 65535): {value!r}")
    return number
