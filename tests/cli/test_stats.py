"""`memoryd stats`: the whole store's figures, or one scope's and nothing else."""

from __future__ import annotations

import json

import pytest

from memoryd.settings import Settings
from tests.cli.test_cli import memoryd
from tests.factories import add_turns

pytestmark = pytest.mark.slow  # every test runs `memoryd` as a process of its own


def test_stats_of_a_scope_show_only_that_scopes_figures(settings: Settings) -> None:
    from memoryd.client import MemoryClient

    client = MemoryClient(settings, dispatch=False)
    client.remember("bot", "ann", "Allergic to peanuts")
    client.remember("bot", "bob", "Lives in Lisbon")
    client.remember("bot", "bob", "Has a cat called Miso")
    add_turns(settings, 2, user_id="bob")
    add_turns(settings, 1, start=2, user_id="ann")

    out = memoryd(settings, "stats", "--agent", "bot", "--user", "ann")
    assert out.returncode == 0, out.stderr
    scoped = json.loads(out.stdout)
    # No store-wide pipeline figures (bob's turns, every batch's tokens) in a scope's.
    assert scoped.keys() == {"scope", "health"}
    assert scoped["scope"] == {"agent_id": "bot", "user_id": "ann"}
    assert (scoped["health"]["active"], scoped["health"]["pending_turns"]) == (1, 1)

    whole = json.loads(memoryd(settings, "stats").stdout)
    assert whole["pipeline"]["turns"] == {"pending": 3}
    assert (whole["health"]["active"], whole["health"]["pending_turns"]) == (3, 3)

    half = memoryd(settings, "stats", "--agent", "bot")  # was the whole store's, unsaid
    assert (half.returncode, half.stdout) == (2, "")
    assert half.stderr == "memoryd: stats: give both --agent and --user (one scope), or neither\n"
