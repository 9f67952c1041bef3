"""Files the CLI reads (`--file`): a mistake in one is a single line naming the file and
where in it, exit code 2, before anything is stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.settings import Settings
from tests.cli.test_cli import memoryd

# Every test runs `memoryd` as a process of its own, on the embedded default (as
# tests/cli/test_cli.py).
pytestmark = [pytest.mark.slow, pytest.mark.parametrize("backend", ["sqlite"])]

SCOPE = ["--agent", "bot", "--user", "ann"]


def test_a_bad_json_file_is_one_line_naming_it(settings: Settings, tmp_path: Path) -> None:
    bad = tmp_path / "payload.json"
    bad.write_text('{"turns": [\n  {"agent_id": "bot",}\n]}\n')
    out = memoryd(settings, "enqueue", "--file", str(bad))
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (
        f"memoryd: {bad}: not JSON: Expecting property name enclosed in double quotes"
        " at line 2, column 22\n"
    )
    edited = memoryd(settings, "profile", "edit", *SCOPE, "--file", str(bad))
    assert edited.returncode == 2
    assert edited.stderr.startswith(f"memoryd: {bad}: not JSON: ")
    assert edited.stderr.endswith("at line 2, column 22\n")

    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    edited = memoryd(settings, "profile", "edit", *SCOPE, "--file", str(listed))
    assert (edited.returncode, edited.stderr) == (
        2,
        f"memoryd: {listed}: expected a JSON object, got list\n",
    )
    patched = memoryd(settings, "profile", "patch", *SCOPE, '{"timezone": }')
    assert patched.returncode == 2
    assert patched.stderr.startswith("memoryd: the patch: not JSON: ")


def test_a_missing_file_is_one_line_naming_it(settings: Settings, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.json"
    expected = f"memoryd: {missing}: cannot read it: No such file or directory\n"
    for command in (["enqueue"], ["import"], ["profile", "edit", *SCOPE]):
        out = memoryd(settings, *command, "--file", str(missing))
        assert (out.returncode, out.stderr) == (2, expected), command
    stats = json.loads(memoryd(settings, "stats").stdout)
    assert stats["pipeline"]["turns"] == {}  # nothing was stored


def test_enqueue_file_end_ends_the_sessions_of_its_turns(
    settings: Settings, tmp_path: Path
) -> None:
    from memoryd.models.db import session_scope
    from memoryd.models.tables import ChatSession
    from tests.factories import add_turns, turn_item

    add_turns(settings, 1, session_id="other")  # not in the file: stays open
    payload = tmp_path / "payload.json"
    turns = [
        turn_item(0),
        turn_item(1, session_id=" s2 "),  # stored as "s2"
        turn_item(2),
        turn_item(3, session_id="s3", content=""),  # rejected: s3 is never stored
    ]
    payload.write_text(json.dumps({"turns": turns}))
    out = memoryd(settings, "enqueue", "--file", str(payload), "--end", "--no-dispatch")
    assert out.returncode == 1, out.stderr  # one item rejected
    result = json.loads(out.stdout)
    assert (result["accepted"], result["ended_sessions"]) == (3, 2)
    with session_scope(settings.storage, readonly=True) as session:
        rows = session.query(ChatSession.session_id, ChatSession.ended_at).all()
        ended = {name: at is not None for name, at in rows}
    assert ended == {"s1": True, "s2": True, "other": False}
