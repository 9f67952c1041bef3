"""schemathesis drives every operation of the served OpenAPI document with generated
input (coverage, fuzzing and stateful phases): no request may end in a 5xx."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from memoryd.settings import Settings
from tests.server.conftest import LiveServer, make_key

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


def test_no_generated_request_gets_a_server_error(
    live: LiveServer, api_settings: Settings, tmp_path: Path
) -> None:
    key = make_key(api_settings, "fuzz", admin=True)  # admin: every operation is reachable
    done = subprocess.run(
        [
            str(SCHEMATHESIS),
            "run",
            f"{live.url}/openapi.json",
            "--checks",
            "not_a_server_error",
            "--header",
            f"Authorization: Bearer {key}",
            "--max-examples",
            "10",
            "--seed",
            "1",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "passed" in done.stdout
