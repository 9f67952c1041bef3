"""The `memoryd` command line, run as a user runs it: a subprocess with MEMORYD_* set."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select, update

from memoryd.settings import Settings
from testkit.fakellm import FakeLLM
from testkit.workers import settings_env
from tests.conftest import with_llm

# Every test runs `memoryd` as a process of its own, on the embedded default: the command
# line is a layer over the client, whose paths run on both databases in the other tests.
pytestmark = [pytest.mark.slow, pytest.mark.parametrize("backend", ["sqlite"])]


def memoryd(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memoryd", *args],
        env=settings_env(settings),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_enqueue_search_show_history_delete_restore(settings: Settings, tmp_path: Path) -> None:
    scope = ["--agent", "bot", "--user", "ann"]
    out = memoryd(
        settings, "enqueue", *scope, "--session", "s1", "--no-dispatch", "--content", "Call me Sam"
    )
    assert out.returncode == 0 and json.loads(out.stdout)["accepted"] == 1

    bad = memoryd(settings, "enqueue", *scope, "--session", "s1", "--content", "")
    assert bad.returncode == 1 and "content" in bad.stdout

    from memoryd.client import MemoryClient

    memory = MemoryClient(settings).remember("bot", "ann", "Allergic to peanuts")
    found = memoryd(settings, "search", *scope, "peanut")
    assert found.returncode == 0 and "Allergic to peanuts" in found.stdout
    assert json.loads(memoryd(settings, "show", *scope, str(memory.id)).stdout)["id"] == memory.id
    assert memoryd(settings, "delete", *scope, str(memory.id)).returncode == 0
    assert "Allergic" not in memoryd(settings, "list", *scope).stdout
    assert "Allergic" in memoryd(settings, "list", *scope, "--status", "deleted").stdout
    assert memoryd(settings, "restore", *scope, str(memory.id)).returncode == 0
    history = memoryd(settings, "history", *scope, str(memory.id)).stdout
    assert [line.split()[2] for line in history.splitlines()] == ["created", "deleted", "restored"]
    missing = memoryd(settings, "show", "--agent", "bot", "--user", "bob", str(memory.id))
    assert missing.returncode == 1 and "no memory" in missing.stderr

    stats = json.loads(memoryd(settings, "stats").stdout)
    assert stats["pipeline"]["turns"] == {"pending": 1}
    assert stats["health"]["active"] == 1


def test_history_prints_every_entry_of_a_long_history(settings: Settings) -> None:
    """The API gives a history a page at a time; the commands read every page."""
    from tests.server.test_history_pages import CONFIRMATIONS, changed_often, confirmed_daily

    scope = ["--agent", "bot", "--user", "ann"]
    memory_id = confirmed_daily(settings)
    out = memoryd(settings, "history", *scope, str(memory_id))
    kinds = [line.split()[2] for line in out.stdout.splitlines()]
    assert kinds == ["created"] + ["confirmed"] * CONFIRMATIONS, out.stderr
    changed_often(settings, 1234)
    out = memoryd(settings, "profile", "history", *scope)
    versions = [line.split()[0] for line in out.stdout.splitlines()]
    assert versions == [f"v{n}" for n in range(1, 1235)], out.stderr


def test_as_of_reads_the_past_and_control_characters_print_escaped(settings: Settings) -> None:
    from memoryd.client import MemoryClient

    scope = ["--agent", "bot", "--user", "ann"]
    MemoryClient(settings).remember("bot", "ann", "Likes \x1b]0;owned\x07 green tea")
    today = memoryd(settings, "search", *scope, "green tea")
    assert "Likes \\x1b]0;owned\\x07 green tea" in today.stdout and "\x1b" not in today.stdout
    past = ["--as-of", "2000-01-01T00:00:00Z"]
    assert "green tea" not in memoryd(settings, "search", *scope, "green tea", *past).stdout
    assert "green tea" not in memoryd(settings, "list", *scope, *past).stdout
    block = memoryd(settings, "context", *scope, "what tea does ann like", *past)
    assert block.returncode == 0 and block.stdout.strip() == "(nothing fits)"
    naive = memoryd(settings, "list", *scope, "--as-of", "2026-03-01")
    assert naive.returncode == 2 and "--as-of: give a timezone" in naive.stderr


def test_export_then_import_round_trip(settings: Settings, tmp_path: Path) -> None:
    from memoryd.client import MemoryClient

    client = MemoryClient(settings)
    kept = client.remember("bot", "ann", "Lives in Lisbon")
    gone = client.remember("bot", "ann", "Old hobby: chess")
    client.forget("bot", "ann", gone.id)
    dump = tmp_path / "memories.jsonl"
    assert memoryd(settings, "export", "--file", str(dump)).returncode == 0
    lines = dump.read_text().splitlines()
    assert [json.loads(x)["status"] for x in lines] == ["active", "deleted"]

    again = memoryd(settings, "import", "--file", str(dump))  # the store holds both already
    assert json.loads(again.stdout) == {"imported": 0, "skipped": 2, "errors": []}
    dump.write_text('{"agent_id": "bot"}\nnot json\n')
    bad = memoryd(settings, "import", "--file", str(dump))
    assert bad.returncode == 1 and len(json.loads(bad.stdout)["errors"]) == 2
    assert client.get("bot", "ann", kept.id).content == "Lives in Lisbon"


def test_bad_arguments_and_settings_are_reported(settings: Settings) -> None:
    out = memoryd(settings, "show", "--agent", "", "--user", "ann", "1")
    assert out.returncode == 2 and "agent_id" in out.stderr
    out = memoryd(settings, "serve", "--port", "99999")  # it bound a port of its choosing
    assert out.returncode == 2 and "argument --port: must be from 1 to 65,535" in out.stderr
    # A traceback from the database's integer; an empty list as if nothing were stored.
    out = memoryd(settings, "show", "--agent", "bot", "--user", "ann", "9" * 24)
    assert out.returncode == 2 and "argument id: must be from 1 to 9,223,372" in out.stderr
    out = memoryd(settings, "search", "--agent", "bot", "--user", "ann", "tea", "-k", "0")
    assert out.returncode == 2 and "argument -k: must be from 1 to 500, got 0" in out.stderr
    env_settings = settings.updated(**{"batch_size": 1})
    broken = subprocess.run(
        [sys.executable, "-m", "memoryd", "stats"],
        env={**settings_env(env_settings), "MEMORYD_BATCH_SIZE": "0"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert broken.returncode == 2 and "MEMORYD_BATCH_SIZE" in broken.stderr


def test_configuration_and_database_mistakes_are_one_line(settings: Settings) -> None:
    def run(**env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memoryd", "stats"],
            env={**settings_env(settings), "MEMORYD_STARTUP_WAIT_SECONDS": "0", **env},
            capture_output=True,
            text=True,
            timeout=60,
        )

    cases = {
        "MEMORYD_DATABASE_URL=nonsense": "memoryd: invalid setting: MEMORYD_DATABASE_URL: not a",
        "MEMORYD_DATABASE_URL=postgresql+psycopg://u:secret@127.0.0.1:1/x": (
            "memoryd: cannot use the database at postgresql+psycopg://u:***@127.0.0.1:1/x"
        ),
        "MEMORYD_DATABASE_URL=sqlite:////tmp/memoryd-never-migrated.db": (
            "has no memoryd tables: run `memoryd migrate`"
        ),
    }
    for assignment, expected in cases.items():
        name, value = assignment.split("=", 1)
        out = run(**{name: value})
        assert out.returncode in (1, 2)
        assert out.stderr.count("\n") == 1, out.stderr  # one line, no traceback
        assert expected in out.stderr


def test_a_data_folder_that_cannot_be_made_stops_every_command_in_one_line(
    settings: Settings, tmp_path: Path
) -> None:
    """A worker whose data folder cannot be made used to log the error, carry on
    unconfigured and start on Celery's default broker (amqp://localhost), which may be
    someone else's: it must end at once, naming the setting."""
    occupied = tmp_path / "a-file"
    occupied.write_text("not a folder")
    env = settings_env(settings)
    del env["MEMORYD_DATABASE_URL"]  # the embedded default, in the data folder
    env |= {"MEMORYD_DATA_DIR": str(occupied / "data"), "MEMORYD_BROKER_URL": "filesystem://"}
    for command in (["stats"], ["worker"], ["beat"]):
        out = subprocess.run(
            [sys.executable, "-m", "memoryd", *command],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        said = out.stdout + out.stderr
        assert out.returncode != 0, (command, said)
        assert f"memoryd: MEMORYD_DATA_DIR={occupied / 'data'}: cannot make" in out.stderr, said
        assert "Traceback" not in said and "amqp://" not in said, (command, said)


def test_retry_re_drives_only_the_scope_it_names(settings: Settings) -> None:
    from memoryd.models.db import session_scope
    from memoryd.models.tables import Turn, TurnStatus
    from tests.factories import add_turns

    add_turns(settings, 2, user_id="ann")
    add_turns(settings, 3, user_id="bob", session_id="s2")
    with session_scope(settings.storage) as session:
        session.execute(update(Turn).values(status=TurnStatus.FAILED))
    out = memoryd(settings, "retry", "--agent", "bot", "--user", "ann")
    assert out.returncode == 0 and out.stdout.startswith("2 failed turns back to pending")
    with session_scope(settings.storage, readonly=True) as session:
        left = session.scalars(select(Turn.user_id).where(Turn.status == TurnStatus.FAILED))
        assert sorted(left) == ["bob", "bob", "bob"]


def test_skip_and_purge_settle_only_the_scope_they_name(settings: Settings) -> None:
    from memoryd.models.db import session_scope
    from memoryd.models.tables import Turn, TurnStatus
    from tests.factories import add_turns

    add_turns(settings, 2, user_id="ann")
    add_turns(settings, 3, start=2, user_id="bob", session_id="s2")
    add_turns(settings, 1, start=5, user_id="cy", session_id="s3")
    with session_scope(settings.storage) as session:
        session.execute(update(Turn).values(status=TurnStatus.FAILED))
    out = memoryd(settings, "skip", "--agent", "bot", "--user", "ann")
    assert out.returncode == 0 and out.stdout.startswith("2 failed turns skipped")
    out = memoryd(settings, "purge", "--agent", "bot", "--user", "bob", "--session", "s2")
    assert out.returncode == 0 and out.stdout.startswith("3 failed turns deleted")
    with session_scope(settings.storage, readonly=True) as session:
        left = session.execute(select(Turn.user_id, Turn.status).order_by(Turn.id)).all()
    expected = [("ann", "skipped"), ("ann", "skipped"), ("cy", "failed")]
    assert [tuple(row) for row in left] == expected


def test_profile_show_patch_edit_history(settings: Settings, tmp_path: Path) -> None:
    scope = ["--agent", "bot", "--user", "ann"]
    out = memoryd(settings, "profile", "patch", *scope, '{"timezone": "Europe/Lisbon"}')
    assert out.returncode == 0 and json.loads(out.stdout)["timezone"] == "Europe/Lisbon"
    bad = memoryd(settings, "profile", "patch", *scope, '{"timezone": 3}')
    assert bad.returncode == 1 and "timezone" in bad.stderr
    # `edit` opens the document in $EDITOR, as `git commit` does; here a script edits it.
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import json, sys\n"
        "doc = json.load(open(sys.argv[1]))\n"
        "doc['occupation'] = 'nurse'\n"
        "json.dump(doc, open(sys.argv[1], 'w'))\n"
    )
    edited = subprocess.run(
        [sys.executable, "-m", "memoryd", "profile", "edit", *scope],
        env={**settings_env(settings), "EDITOR": f"{sys.executable} {editor}"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert edited.returncode == 0, edited.stderr
    shown = json.loads(memoryd(settings, "profile", "show", *scope).stdout)
    assert (shown["content"]["occupation"], shown["version"]) == ("nurse", 2)
    prompt = memoryd(settings, "profile", "show", *scope, "--prompt").stdout
    assert "Timezone: Europe/Lisbon" in prompt and "Occupation: nurse" in prompt
    history = memoryd(settings, "profile", "history", *scope).stdout.splitlines()
    assert [line.split()[0] for line in history] == ["v1", "v2"]
    shared = memoryd(settings, "profile", "patch", "--agent", "bot", "--user", "*", "{}")
    assert shared.returncode == 1 and "shared=True" in shared.stderr


def test_export_and_import_carry_profiles(settings: Settings, tmp_path: Path) -> None:
    from memoryd.client import MemoryClient

    client = MemoryClient(settings)
    client.patch_profile("bot", "ann", "work", {"expertise": ["Go"], "team_context": "Infra"})
    dump = tmp_path / "all.jsonl"
    assert memoryd(settings, "export", "--file", str(dump)).returncode == 0
    lines = [json.loads(x) for x in dump.read_text().splitlines()]
    assert [(x["kind"], x["type"]) for x in lines] == [("profile", "user"), ("profile", "work")]
    client.patch_profile("bot", "ann", "work", {"team_context": None})
    again = memoryd(settings, "import", "--file", str(dump))
    assert json.loads(again.stdout)["profiles"] == 2
    work = client.profile("bot", "ann", "work")
    assert work.content["team_context"] == "Infra"
    assert work.field_meta["team_context"].source == "api"


def test_embed_fills_and_resets_vectors(settings: Settings, fake_llm: FakeLLM) -> None:
    off = memoryd(settings, "embed")
    assert off.returncode == 1 and "MEMORYD_EMBEDDING_MODEL" in off.stderr
    s = with_llm(settings, fake_llm, embedding_model="text-embedding-3-small")
    from memoryd.client import MemoryClient

    MemoryClient(s).remember("bot", "ann", "Prefers green tea")
    MemoryClient(s).remember("bot", "bob", "Lives in Lisbon")
    first = memoryd(s, "embed")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {
        "embedded": 2,
        "active_with_vector": 2,
        "missing": 0,
        "refused": 0,
        "another_models_vectors": 0,
    }
    again = memoryd(s, "embed", "--reset")
    assert again.stdout.startswith("cleared 2 vectors")
    assert '"embedded": 2' in again.stdout
    # After a model change, another model's vectors are embedded again only when asked.
    new = s.updated(embedding_model="text-embedding-3-large")
    shell = json.loads(memoryd(new, "embed").stdout)
    assert (shell["embedded"], shell["another_models_vectors"]) == (0, 2)
    asked = json.loads(memoryd(new, "embed", "--other-models").stdout)
    assert (asked["embedded"], asked["another_models_vectors"]) == (2, 0)


def test_erase_asks_for_yes_then_removes_the_user(settings: Settings) -> None:
    from memoryd.client import MemoryClient

    client = MemoryClient(settings, dispatch=False)
    client.remember("bot", "ann", "Allergic to peanuts")
    client.remember("bot", "bob", "Allergic to cats")
    scope = ["--agent", "bot", "--user", "ann"]
    refused = memoryd(settings, "erase", *scope)  # not a terminal: no prompt, no erasure
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert client.list("bot", "ann")
    done = memoryd(settings, "erase", *scope, "--yes")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["rows"]["memories"] == 1 and record["actor"] == "cli" and "ann" not in done.stdout
    assert client.list("bot", "ann") == [] and client.list("bot", "bob")
    bad = memoryd(settings, "erase", "--agent", "bot", "--user", "u" * 201, "--yes")
    assert bad.returncode == 2 and bad.stderr.startswith("memoryd: user_id: ")


def test_a_user_stored_under_the_old_id_rule_is_listed_and_erased_as_stored(
    settings: Settings,
) -> None:
    from memoryd.models.db import session_scope
    from tests.factories import make_memory

    with session_scope(settings.storage) as session:
        make_memory(session, settings, "Stored long ago", agent_id="bot", user_id="team/ann")
    scope = ["--agent", "bot", "--user", "team/ann"]
    refused = memoryd(settings, "list", *scope)
    assert refused.returncode == 2
    assert refused.stderr == "memoryd: user_id: an id may not hold '/' or a control character\n"
    listed = memoryd(settings, "list", *scope, "--as-stored")
    assert listed.returncode == 0 and "Stored long ago" in listed.stdout, listed.stderr
    erased = memoryd(settings, "erase", *scope, "--as-stored", "--yes")
    assert erased.returncode == 0 and json.loads(erased.stdout)["rows"]["memories"] == 1
    assert "Stored long ago" not in memoryd(settings, "list", *scope, "--as-stored").stdout
