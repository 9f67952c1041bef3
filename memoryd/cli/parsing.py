"""The command line's argument parser, kept apart from the commands' imports so that
`memoryd worker` and `memoryd beat` (memoryd/cli/launch.py) use it at no cost."""

from __future__ import annotations

import argparse
from collections.abc import Callable
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


# A row id or count no SQL integer of the store can pass: past it, a statement failed.
LARGEST = 2**63 - 1


def whole(least: int, most: int = LARGEST) -> Callable[[str], int]:
    """An argparse type: a whole number from `least` to `most`, else one line naming the
    option (a memory id of 24 digits failed its statement with a traceback; -k 0 and
    --limit -5 printed nothing, as if nothing were stored)."""

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
        if not least <= number <= most:
            raise argparse.ArgumentTypeError(f"must be from {least:,} to {most:,}, got {value}")
        return number

    return parse


port = whole(1, 65_535)
