"""What the CLI's commands share: a scope from the arguments, validated, JSON in and out."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterator
from typing import IO, Any, TypeVar

from pydantic import BaseModel

from memoryd.models.schemas import MAX_PAGE, Ident, StoredId
from memoryd.settings import Settings


class InputError(Exception):
    """What the user gave cannot be used (a file, a mix of options): one line, exit 2."""


class ScopeArgs(BaseModel):
    agent_id: Ident
    user_id: Ident


class StoredScopeArgs(BaseModel):
    """Ids exactly as rows hold them (--as-stored)."""

    agent_id: StoredId
    user_id: StoredId


class SessionArgs(ScopeArgs):
    session_id: Ident


AS_STORED_HELP = (
    "take --agent and --user exactly as stored: for rows kept under the looser id rule of"
    " earlier versions (a '/' or a control character)"
)


def scope_args(ns: argparse.Namespace) -> ScopeArgs | StoredScopeArgs:
    if getattr(ns, "as_stored", False):
        return StoredScopeArgs(agent_id=ns.agent, user_id=ns.user)
    return ScopeArgs(agent_id=ns.agent, user_id=ns.user)


# Control characters (ESC, BEL, carriage return…) a memory may hold: shown escaped, so
# what a user once said can never move the operator's cursor or retitle their terminal.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str, keep: str = "") -> str:
    """`text` with its control characters but those in `keep` written as escapes."""
    return _CONTROL.sub(lambda m: m[0] if m[0] in keep else repr(m[0])[1:-1], text)


def print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2, default=str))


def open_input(path: str) -> IO[str]:
    """A file the user named, for reading ('-' is standard input); InputError names it
    when it cannot be opened."""
    if path == "-":
        return sys.stdin
    try:
        return open(path, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read it: {exc.strerror or exc}") from None


def parse_json(text: str, source: str) -> Any:
    """JSON the user gave; InputError names `source` and where the mistake is."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{source}: not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None


def read_json_file(path: str) -> Any:
    """The JSON document in a file the user named ('-' is standard input)."""
    source = "standard input" if path == "-" else path
    fh = open_input(path)
    try:
        text = fh.read()
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"{source}: cannot read it: {exc.strerror or exc}") from None
    finally:
        if fh is not sys.stdin:
            fh.close()
    return parse_json(text, source)


def client(settings: Settings) -> Any:
    """A MemoryClient that leaves dispatch to the sweep (loaded when a command needs it)."""
    from memoryd.client import MemoryClient

    return MemoryClient(settings, dispatch=False)


Entry = TypeVar("Entry")


def every_page(read: Callable[[int], list[Entry]], mark: Callable[[Entry], int]) -> Iterator[Entry]:
    """Every entry of a history read a page at a time: `read(after)` gives the page after
    the entry marked `after`, `mark(entry)` an entry's mark (event id, version)."""
    after = 0
    while True:
        page = read(after)
        yield from page
        if len(page) < MAX_PAGE:
            return
        after = mark(page[-1])
