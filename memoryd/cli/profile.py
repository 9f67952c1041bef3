"""`memoryd profile show|edit|patch|history`: the two profile documents of a scope."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from memoryd.cli.common import InputError, every_page, parse_json, read_json_file
from memoryd.cli.common import client as _client
from memoryd.cli.common import print_json as _print
from memoryd.models.profiles import ProfileType
from memoryd.models.schemas import Ident
from memoryd.settings import Settings


class ProfileArgs(BaseModel):
    agent_id: Ident
    user_id: Ident
    type: ProfileType


def add_parser(sub: Any) -> None:
    what = "show or change a scope's user or work profile"
    parser = sub.add_parser("profile", help=what, description=what)
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, fn, help_ in [
        ("show", cmd_show, "the document as JSON, or --prompt as a system prompt renders it"),
        ("edit", cmd_edit, "replace the document: from --file, else in $EDITOR"),
        ("patch", cmd_patch, "apply a JSON Merge Patch (RFC 7396) given as an argument"),
        ("history", cmd_history, "every change, oldest first"),
    ]:
        p = actions.add_parser(name, help=help_, description=help_)
        p.set_defaults(fn=fn)
        p.add_argument("--agent", required=True, help="the agent id")
        p.add_argument(
            "--user", required=True, help="the user id ('*': the agent's shared profile)"
        )
        p.add_argument(
            "--type",
            default="user",
            choices=[t.value for t in ProfileType],
            help="which of the scope's two profiles",
        )
        p.add_argument("--shared", action="store_true", help="change the agent's '*' scope")
        if name == "show":
            p.add_argument("--prompt", action="store_true", help="as a system prompt shows it")
        elif name == "edit":
            p.add_argument("--file", help="the whole document as JSON ('-': standard input)")
        elif name == "patch":
            p.add_argument(
                "patch", help='the patch as JSON, e.g. \'{"timezone": "Europe/Lisbon"}\''
            )


def _args(ns: argparse.Namespace) -> ProfileArgs:
    return ProfileArgs(agent_id=ns.agent, user_id=ns.user, type=ns.type)


def cmd_show(settings: Settings, ns: argparse.Namespace) -> int:
    a = _args(ns)
    client = _client(settings)
    if ns.prompt:
        print(client.build_profile_prompt(a.agent_id, a.user_id, a.type))
    else:
        _print(client.profile(a.agent_id, a.user_id, a.type).model_dump(mode="json"))
    return 0


def cmd_edit(settings: Settings, ns: argparse.Namespace) -> int:
    a = _args(ns)
    client = _client(settings)
    if ns.file:
        source = "standard input" if ns.file == "-" else ns.file
        document = _object(read_json_file(ns.file), source)
    else:
        text = _in_editor(client.profile(a.agent_id, a.user_id, a.type).content)
        document = _object(parse_json(text, "the edited document"), "the edited document")
    saved = client.put_profile(a.agent_id, a.user_id, a.type, document, shared=ns.shared)
    print(f"{a.type} profile of {a.agent_id}/{a.user_id} saved: version {saved.version}")
    return 0


def cmd_patch(settings: Settings, ns: argparse.Namespace) -> int:
    a = _args(ns)
    patch = _object(parse_json(ns.patch, "the patch"), "the patch")
    saved = _client(settings).patch_profile(a.agent_id, a.user_id, a.type, patch, shared=ns.shared)
    _print(saved.content)
    return 0


def cmd_history(settings: Settings, ns: argparse.Namespace) -> int:
    a, client = _args(ns), _client(settings)
    page = partial(client.profile_history, a.agent_id, a.user_id, a.type)
    for event in every_page(lambda after: page(after=after), lambda e: e.version):
        change = json.dumps(event.patch, ensure_ascii=False, default=str)
        print(f"v{event.version}  {event.created_at:%Y-%m-%d %H:%M:%S}  {event.actor:<9} {change}")
    return 0


def _object(value: Any, source: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(f"{source}: expected a JSON object, got {type(value).__name__}")
    return value


def _in_editor(content: dict[str, Any]) -> str:
    """Open the current document in $EDITOR (like `git commit`) and return what was saved."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as fh:
        json.dump(content, fh, ensure_ascii=False, indent=2)
        path = fh.name
    try:
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
        subprocess.run([*shlex.split(editor), path], check=True)
        return Path(path).read_text(encoding="utf-8")
    finally:
        os.unlink(path)
