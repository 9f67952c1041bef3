"""schemathesis drives every operation of the served OpenAPI document with generated
input (examples, coverage, fuzzing and stateful phases) and runs all of its checks, as
it does when none is named: no 5xx; statuses, headers, content types and bodies as
documented; valid input accepted and invalid input refused; 405 with `Allow`; keys
enforced; deleted and created resources behaving as such. The few ways the API works
that a check cannot know are in schemathesis.toml beside this file, each explained.

The coverage phase (boundary and malformed values of every parameter, two thirds of
the run) runs against PostgreSQL, the stricter store; SQLite gets the other phases."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd.settings import Settings
from tests.server.conftest import LiveServer, make_key

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
CONFIG = Path(__file__).with_name("schemathesis.toml")
PHASES = {"postgres": "examples,coverage,fuzzing,stateful", "sqlite": "examples,fuzzing,stateful"}


@pytest.mark.long(seconds=60)
@pytest.mark.timeout(1800)
def test_every_check_passes_on_every_operation(
    api_settings: Settings, tmp_path: Path, backend: str
) -> None:
    keys = {
        "MEMORYD_FUZZ_ADMIN_KEY": make_key(api_settings, "fuzz", admin=True),
        "MEMORYD_FUZZ_USER_KEY": make_key(
            api_settings, "fuzz-user", agent_ids=["fuzz"], user_id="ann"
        ),
    }
    # Keys cached as in a deployment: some 10,000 requests need not look each one up.
    # The fuzzer sends wrong keys on purpose, many a minute: no throttle (test_throttle.py).
    cached = api_settings.updated(**{"api_key_cache_seconds": 300.0, "auth_failure_limit": 0})
    with LiveServer(cached) as live:
        done = subprocess.run(
            [
                str(SCHEMATHESIS),
                "--config-file",
                str(CONFIG),
                "run",
                f"{live.url}/openapi.json",
                "--max-examples",
                "10",
                "--seed",
                "1",
                "--generation-database",
                "none",
                "--no-color",
                "--phases",
                PHASES[backend],
                # A timing check of the generator, not of the API: on a loaded machine
                # the turns' body (many patterned fields) trips it.
                "--suppress-health-check=too_slow",
            ],
            capture_output=True,
            text=True,
            timeout=1740,  # 295 s on a fast 2-core machine, 701 to 840+ on a slow one
            cwd=tmp_path,
            env={**os.environ, **keys},
        )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-2000:]
    assert "failure" not in summary and "error" not in summary, summary
