"""The CLI names a MEMORYD_* variable that is no setting, instead of ignoring it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from memoryd.settings import Settings
from testkit.workers import settings_env

pytestmark = pytest.mark.slow  # every test runs `memoryd` as a process of its own


def test_a_misspelt_variable_is_named_with_the_closest_setting(settings: Settings) -> None:
    env = {
        **settings_env(settings),
        "MEMORYD_DATABSE_URL": "postgresql+psycopg://elsewhere/memoryd",
        "MEMORYD_COLOUR": "blue",
        # Read by the test suite and the benches, not by Settings: no notice.
        "MEMORYD_TEST_PG": "postgresql+psycopg://postgres@127.0.0.1:5432",
        "MEMORYD_BENCH_REDIS": "redis://127.0.0.1:6379/4",
    }
    out = subprocess.run(
        [sys.executable, "-m", "memoryd", "stats"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["health"]["active"] == 0  # the command still runs
    assert out.stderr.splitlines() == [
        "memoryd: MEMORYD_COLOUR is not a memoryd setting, so it is ignored",
        "memoryd: MEMORYD_DATABSE_URL is not a memoryd setting; did you mean MEMORYD_DATABASE_URL?",
    ]
