"""/metrics shows what an operator needs, an LLM failure included, in Prometheus format."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient
from freezegun import freeze_time
from prometheus_client.parser import text_string_to_metric_families

from memoryd.client import MemoryClient
from memoryd.extraction.batch import extract_session
from memoryd.extraction.stats import pipeline_stats
from memoryd.maintenance.compression import compress_session
from memoryd.models.keys import SessionKey
from memoryd.server.app import create_app
from memoryd.settings import Settings
from testkit import fakellm
from testkit.fakellm import FakeLLM
from tests.conftest import with_llm
from tests.factories import turn_item
from tests.maintenance.test_compression import KEY, chat, compress_settings
from tests.server.conftest import Keys, bearer


def scrape(api: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = api.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        assert family.name.startswith("memoryd_"), family.name
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:  # type: ignore[type-arg]
    return float(samples.get((name, tuple(sorted(labels.items()))), 0.0))


def fresh_scrape(settings: Settings) -> dict:  # type: ignore[type-arg]
    """A new app: its database figures are not the ones cached by an earlier scrape."""
    with TestClient(create_app(settings, client=MemoryClient(settings, dispatch=False))) as app:
        return scrape(app)


def test_ingest_rejections_backlog_and_recall_latency_are_counted(
    api: TestClient, api_settings: Settings, keys: Keys
) -> None:
    before = scrape(api)
    turns = [turn_item(0), turn_item(1), turn_item(2, role="robot")]
    api.post("/v1/turns", json={"turns": turns}, headers=bearer(keys.bot))
    query = {"agent_id": "bot", "user_id": "ann", "query": "message"}
    api.post("/v1/recall", json=query, headers=bearer(keys.bot))
    api.post("/v1/context", json=query, headers=bearer(keys.bot))
    after = fresh_scrape(api_settings)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("memoryd_turns_ingested_total") == 2
    assert delta("memoryd_turns_rejected_total", field="role") == 1
    assert delta("memoryd_recall_seconds_count", kind="recall") == 1
    assert delta("memoryd_recall_seconds_count", kind="context") == 1
    assert value(after, "memoryd_pending_turns") == 2
    assert 0 <= value(after, "memoryd_oldest_pending_turn_age_seconds") < 60
    with freeze_time(datetime.now(UTC) + timedelta(hours=1)):
        later = fresh_scrape(api_settings)
    assert 3600 <= value(later, "memoryd_oldest_pending_turn_age_seconds") < 3660


def test_the_backlog_ages_from_when_memoryd_received_a_turn_not_its_timestamp(
    api: TestClient, api_settings: Settings, keys: Keys
) -> None:
    """An import sends turns said long ago: the backlog has waited seconds, not days."""
    said = (datetime.now(UTC) - timedelta(days=2)).isoformat()
    imported = turn_item(0, timestamp=said)
    assert api.post("/v1/turns", json=imported, headers=bearer(keys.bot)).status_code == 202
    samples = fresh_scrape(api_settings)
    assert value(samples, "memoryd_pending_turns") == 1
    assert 0 <= value(samples, "memoryd_oldest_pending_turn_age_seconds") < 60
    with freeze_time(datetime.now(UTC) + timedelta(hours=1)):
        later = fresh_scrape(api_settings)
    assert 3600 <= value(later, "memoryd_oldest_pending_turn_age_seconds") < 3660


def test_failed_batches_dead_letters_and_llm_tokens_show(
    api_settings: Settings, keys: Keys, fake_llm: FakeLLM
) -> None:
    s = with_llm(api_settings, fake_llm, max_attempts=1)
    client = MemoryClient(s, dispatch=False)
    client.enqueue_turns([turn_item(0, content="Call me Sam.")])
    client.enqueue_turns([turn_item(0, session_id="s2", content="I prefer tea.")])
    for session in ("s1", "s2"):
        client.end_session("bot", "ann", session)
    fake_llm.push(fakellm.bad_request())
    assert extract_session(s, SessionKey("bot", "ann", "s1")).dead_lettered == 1
    assert extract_session(s, SessionKey("bot", "ann", "s2")).created == 1

    samples = fresh_scrape(s)
    assert value(samples, "memoryd_batches_total", kind="extract", status="failed") == 1
    assert value(samples, "memoryd_batches_total", kind="extract", status="done") == 1
    assert value(samples, "memoryd_dead_letter_turns") == 1
    assert value(samples, "memoryd_llm_calls_total", kind="extract") == 1
    assert value(samples, "memoryd_llm_tokens_total", kind="extract", direction="in") > 0
    assert value(samples, "memoryd_llm_tokens_total", kind="extract", direction="out") > 0
    assert value(samples, "memoryd_pending_turns") == 0


def test_compression_runs_are_counted_apart_from_extraction(
    api_settings: Settings, fake_llm: FakeLLM
) -> None:
    s = compress_settings(api_settings, fake_llm)
    chat(s, 0, 30)  # extracted by the offline rules: batches without an LLM call
    assert compress_session(s, KEY)
    samples = fresh_scrape(s)
    assert value(samples, "memoryd_batches_total", kind="compress", status="done") == 1
    assert value(samples, "memoryd_batches_total", kind="extract", status="done") >= 1
    assert value(samples, "memoryd_llm_calls_total", kind="compress") == fake_llm.calls > 0
    assert value(samples, "memoryd_llm_calls_total", kind="extract") == 0
    assert value(samples, "memoryd_llm_tokens_total", kind="compress", direction="in") > 0
    by_kind = pipeline_stats(s)["by_kind"]
    assert by_kind["compress"]["llm_calls"] == fake_llm.calls
    assert by_kind["extract"]["llm_calls"] == 0
