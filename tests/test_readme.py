"""Every Python snippet in README.md runs as written, in order, on the embedded default
(a fresh SQLite file and the filesystem broker); the JSON payload it shows is valid."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.util._once import Once

from memoryd.ingest.buffer import payload_items, validate_turns
from memoryd.models.migrate import upgrade
from memoryd.settings import Settings, get_settings

README = Path(__file__).resolve().parent.parent / "README.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), re.S)


def test_python_snippets_run_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMORYD_DATA_DIR", str(tmp_path / "data"))
    for name in ("MEMORYD_DATABASE_URL", "MEMORYD_BROKER_URL"):
        monkeypatch.delenv(name, raising=False)
    get_settings.cache_clear()
    upgrade(Settings())
    snippets = blocks("python")
    assert len(snippets) >= 5
    namespace: dict[str, object] = {}
    try:
        with fresh_tracer_provider():
            for number, code in enumerate(snippets, 1):
                exec(compile(code, f"README.md python snippet {number}", "exec"), namespace)
    finally:
        get_settings.cache_clear()
    out = capfd.readouterr().out
    assert "Vegan since 2024" in out  # the history snippet printed
    assert "memoryd.recall {'memoryd.agent_id': 'support-bot'" in out  # the tracing one


@contextmanager
def fresh_tracer_provider() -> Iterator[None]:
    """The tracing snippet sets the global tracer provider, as an application does once
    at start-up; OpenTelemetry allows that once per process, so the snippets run as in
    a fresh one and the suite's provider, if any, is put back after."""
    saved = trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE
    trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = None, Once()
    try:
        yield
    finally:
        trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = saved


def test_the_ingest_payload_shown_is_valid() -> None:
    (payload,) = [json.loads(b) for b in blocks("json") if '"turns"' in b]
    good, bad = validate_turns(payload_items(payload), Settings())
    assert len(good) == 1 and bad == []
