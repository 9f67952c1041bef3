"""The Node example runs against a real server; the committed OpenAPI document and the
TypeScript example of docs/http.md are what the code generates."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from memoryd.server import typescript
from memoryd.settings import Settings
from tests.server.conftest import LiveServer, make_key

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "node" / "chat-backend.mjs"
REFRESH = "run `.venv/bin/python -m memoryd.server.typescript` and commit the result"


def test_the_node_example_ingests_ends_a_session_and_reads_context(
    live: LiveServer, api_settings: Settings
) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.fail("the Node example needs node (v18+): apt-get install nodejs")
    key = make_key(api_settings, "node", agent_ids=["support-bot"])
    env = {**os.environ, "MEMORYD_URL": live.url, "MEMORYD_KEY": key}
    done = subprocess.run([node, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["accepted"] == 2 and out["rejected"] == ["2:content"]
    assert "[user] Vegetarian" in out["context"]
    assert out["recent_turns"] == 2


def test_the_committed_openapi_document_is_the_served_one(live: LiveServer) -> None:
    import httpx

    # A generous timeout: the document is built on first request, on a loaded machine.
    served = httpx.get(f"{live.url}/openapi.json", timeout=60).json()
    committed = json.loads(typescript.OPENAPI_FILE.read_text())
    assert served == committed, REFRESH


def test_the_typescript_example_of_the_http_page_is_generated_from_the_document() -> None:
    doc = json.loads(typescript.OPENAPI_FILE.read_text())
    page = typescript.HTTP_PAGE.read_text()
    assert "```typescript\n// Generated from docs/openapi.json" in page
    assert typescript.page_with(page, typescript.typescript_client(doc)) == page, REFRESH
