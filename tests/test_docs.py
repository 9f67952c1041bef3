"""README.md and every page of the documentation site (docs/): each page's Python
snippets run as written, in order, on the embedded default (a fresh SQLite file and
the filesystem broker per page); the JSON payloads they show are valid; the
configuration page's reference is the one Settings gives."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.util._once import Once

from memoryd import env_example
from memoryd.ingest.buffer import payload_items, validate_turns
from memoryd.models.migrate import upgrade
from memoryd.settings import FIELDS as SETTING_FIELDS
from memoryd.settings import Settings, get_settings

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# What a page's snippets print, when what they print is the point.
PRINTED = {
    "python.md": ["Vegan since 2024"],  # the history snippet
    "operations.md": ["memoryd.recall {'memoryd.agent_id': 'support-bot'"],  # tracing
}


def blocks(page: Path, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", page.read_text(), re.S)


def with_snippets(language: str) -> list[Path]:
    return [page for page in PAGES if blocks(page, language)]


def test_every_page_is_in_the_site_and_the_readme_links_only_to_pages() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    assert {p.name for p in PAGES[1:]} == set(re.findall(r"\b([\w-]+\.md)\b", nav))
    linked = re.findall(r"\]\((docs/[^)#]+)", (ROOT / "README.md").read_text())
    assert linked and all((ROOT / target).is_file() for target in linked)
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


@pytest.mark.parametrize("page", with_snippets("python"), ids=lambda p: p.name)
def test_python_snippets_run_as_written(
    page: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMORYD_DATA_DIR", str(tmp_path / "data"))
    for name in ("MEMORYD_DATABASE_URL", "MEMORYD_BROKER_URL"):
        monkeypatch.delenv(name, raising=False)
    get_settings.cache_clear()
    upgrade(Settings())
    namespace: dict[str, object] = {}
    try:
        with fresh_tracer_provider():
            for number, code in enumerate(blocks(page, "python"), 1):
                exec(compile(code, f"{page.name} python snippet {number}", "exec"), namespace)
    finally:
        get_settings.cache_clear()
    out = capfd.readouterr().out
    for printed in PRINTED.get(page.name, []):
        assert printed in out


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


def test_the_ingest_payloads_shown_are_valid() -> None:
    payloads = [json.loads(b) for p in with_snippets("json") for b in blocks(p, "json")]
    shown = [p for p in payloads if "turns" in p]
    assert len(shown) >= 2  # README's and the ingest page's
    for payload in shown:
        good, bad = validate_turns(payload_items(payload), Settings().ingest)
        assert good and bad == []


def test_the_configuration_reference_is_the_one_settings_give() -> None:
    page = env_example.CONFIGURATION_PAGE.read_text()
    regenerate = "run `python -m memoryd.env_example` and commit the result"
    assert env_example.configuration_page(page) == page, regenerate
    for name in SETTING_FIELDS:
        assert f"| `MEMORYD_{name.upper()}` |" in page


# A measured figure: a share, a time or a ratio written with its decimals ("64.5%",
# "0.046 s", "3.84x"). "1.00x" is every baseline's own row.
_FIGURE = re.compile(r"\b\d+(?:[.,]\d+)+\s?(?:%|ms|s\b|x\b|×)")
# The same value standing for two different measurements.
_COINCIDENCES = {"3.54x"}  # an earlier run's range (benchmarks) and a table cell (scaling)


def test_no_figure_is_stated_on_two_pages() -> None:
    """A figure lives on one page and the others link to it: two copies drift apart
    when a bench is run again."""
    pages: dict[str, set[str]] = {}
    for page in PAGES:
        for match in _FIGURE.finditer(page.read_text("utf-8")):
            figure = match.group(0).replace(" ", "")
            pages.setdefault(figure, set()).add(page.name)
    twice = {
        figure: sorted(names)
        for figure, names in pages.items()
        if len(names) > 1 and figure not in _COINCIDENCES | {"1.00x"}
    }
    assert not twice, twice
