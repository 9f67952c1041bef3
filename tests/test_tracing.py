"""OpenTelemetry spans (memoryd/tracing.py), in this process, read from the SDK's
in-memory exporter under a tracer provider the test installs as an application would."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memoryd import tracing
from memoryd.client import MemoryClient
from memoryd.extraction.batch import extract_session
from memoryd.models.keys import SessionKey
from memoryd.settings import Settings
from testkit.fakellm import FakeLLM, bad_request
from tests.conftest import with_llm

EXPORTER = InMemorySpanExporter()
WATCHED: list[TracerProvider] = []
SAID = "I am vegetarian and I live in Berlin"
ASKED = "what should I cook for dinner tonight"


def app_provider() -> TracerProvider:
    """The application's provider, installed once per process like a backend's own (or
    the one the README's snippet installed), with EXPORTER among its processors."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    assert isinstance(provider, TracerProvider)
    if provider not in WATCHED:
        provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
        WATCHED.append(provider)
    return provider


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    app_provider()
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


def traced(settings: Settings) -> Settings:
    return settings.updated(**{"tracing": True})


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def everything_recorded(exporter: InMemorySpanExporter) -> str:
    """Every name, attribute, event and status a span holds, as one text."""
    parts = []
    for span in exporter.get_finished_spans():
        parts += [span.name, str(span.status.description)]
        parts += [f"{k}={v}" for k, v in (span.attributes or {}).items()]
        parts += [f"{e.name} {dict(e.attributes or {})}" for e in span.events]
    return "\n".join(parts).lower()


def turns(session: str = "s1") -> list[dict[str, str]]:
    return [
        {"agent_id": "bot", "user_id": "ann", "session_id": session, "role": r, "content": c}
        for r, c in (("user", SAID), ("assistant", "Noted."))
    ]


def test_recall_and_context_are_spans_of_ids_and_counts_never_the_query(
    settings: Settings, spans: InMemorySpanExporter
) -> None:
    client = MemoryClient(traced(settings), dispatch=False)
    client.remember("bot", "ann", "Vegetarian; dinner ideas welcome")
    hits = client.recall(ASKED, "bot", "ann", session_id="s1")
    block = client.build_context(ASKED, "bot", "ann", token_budget=300)
    assert hits and block

    (recall,) = named(spans, "memoryd.recall")
    assert dict(recall.attributes or {}) == {
        "memoryd.agent_id": "bot",
        "memoryd.user_id": "ann",
        "memoryd.session_id": "s1",
        "memoryd.hits": len(hits),
    }
    (context,) = named(spans, "memoryd.context")
    assert context.attributes is not None
    assert context.attributes["memoryd.hits"] == 1
    assert context.attributes["memoryd.token_budget"] == 300
    recorded = everything_recorded(spans)
    assert "dinner" not in recorded and "vegetarian" not in recorded
    # The application's provider got them: memoryd installed none of its own.
    assert tracing._installed is None
    assert trace.get_tracer_provider() is app_provider()


def test_an_extraction_is_a_batch_span_over_the_llm_call_with_model_and_tokens(
    settings: Settings, spans: InMemorySpanExporter, fake_llm: FakeLLM
) -> None:
    llm = traced(with_llm(settings, fake_llm, extraction_model="fake-extractor"))
    client = MemoryClient(llm, dispatch=False)
    client.enqueue_turns(turns())
    client.end_session("bot", "ann", "s1")
    stats = extract_session(llm, SessionKey("bot", "ann", "s1"))
    assert stats.created >= 1

    (batch,) = named(spans, "memoryd.extract_batch")
    attributes = dict(batch.attributes or {})
    assert attributes["memoryd.agent_id"] == "bot" and attributes["memoryd.session_id"] == "s1"
    assert attributes["memoryd.turns"] == 2 and attributes["memoryd.created"] == stats.created
    calls = named(spans, "memoryd.llm.chat")
    assert calls and all(c.parent and c.parent.span_id == batch.context.span_id for c in calls)
    call = dict(calls[0].attributes or {})
    assert call["gen_ai.request.model"] == call["gen_ai.response.model"] == "fake-extractor"
    request = fake_llm.requests[0]
    prompt = sum(len(str(m["content"])) for m in request["messages"]) // 4
    assert call["gen_ai.usage.input_tokens"] == prompt > 0  # what the fake's usage said
    assert call["gen_ai.usage.output_tokens"] > 0
    assert calls[0].kind == trace.SpanKind.CLIENT
    (enqueue,) = named(spans, "memoryd.enqueue")
    assert dict(enqueue.attributes or {}) == {
        "memoryd.turns": 2,
        "memoryd.accepted": 2,
        "memoryd.duplicates": 0,
        "memoryd.dispatched_sessions": 0,
    }
    assert "vegetarian" not in everything_recorded(spans)


def test_a_failed_llm_call_records_the_error_type_not_its_message(
    settings: Settings, spans: InMemorySpanExporter, fake_llm: FakeLLM
) -> None:
    llm = traced(with_llm(settings, fake_llm))
    client = MemoryClient(llm, dispatch=False)
    client.enqueue_turns(turns())
    client.end_session("bot", "ann", "s1")
    fake_llm.push(bad_request())  # its body says "bad model"
    assert extract_session(llm, SessionKey("bot", "ann", "s1")).failed_batches == 1

    (call,) = named(spans, "memoryd.llm.chat")
    assert call.status.status_code == trace.StatusCode.ERROR
    assert (call.attributes or {})["error.type"] == call.status.description == "LLMError"
    assert not call.events  # no exception event: its message may quote the turns
    (batch,) = named(spans, "memoryd.extract_batch")
    assert (batch.attributes or {})["memoryd.failed_batches"] == 1
    assert "bad model" not in everything_recorded(spans)


def test_off_by_default_nothing_is_recorded(
    settings: Settings, spans: InMemorySpanExporter
) -> None:
    assert not settings.server.tracing
    client = MemoryClient(settings, dispatch=False)
    client.enqueue_turns(turns())
    client.recall(ASKED, "bot", "ann")
    client.build_context(ASKED, "bot", "ann")
    assert spans.get_finished_spans() == ()
    assert tracing.span(settings, "memoryd.recall") is tracing.NO_SPAN
    assert tracing.headers(settings.server) is None


def test_off_the_sdk_is_never_imported(tmp_path: Path) -> None:
    """A whole round (enqueue, extraction, recall, context, a task's wrapper) in a fresh
    interpreter with the default settings loads no part of OpenTelemetry."""
    code = f"""
import json, sys
from memoryd.client import MemoryClient
from memoryd.extraction.batch import extract_session
from memoryd.models.keys import SessionKey
from memoryd.models.migrate import upgrade
from memoryd.settings import Settings
import memoryd.tasks.extraction, memoryd.tasks.maintenance
settings = Settings(data_dir={str(tmp_path)!r})
upgrade(settings)
client = MemoryClient(settings, dispatch=False)
client.enqueue_turns({turns()!r})
client.end_session("bot", "ann", "s1")
assert extract_session(settings, SessionKey("bot", "ann", "s1")).created
client.recall("vegetarian", "bot", "ann")
client.build_context("vegetarian", "bot", "ann")
memoryd.tasks.maintenance.cycle()
print(json.dumps(sorted(m for m in sys.modules if m.startswith("opentelemetry"))))
"""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    env["MEMORYD_DATA_DIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded == []  # not the SDK, not even the API


def test_tracing_needs_the_extra_and_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    from pydantic import ValidationError

    from memoryd.settings import explain

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValidationError) as caught:
        Settings(tracing=True)
    assert explain(caught.value) == [
        "MEMORYD_TRACING: needs OpenTelemetry: pip install 'memoryd[otel]'"
    ]


def test_a_maintenance_run_is_a_task_span_named_for_its_job_with_its_counts(
    settings: Settings, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryd.tasks import maintenance
    from memoryd.tasks import traced as traced_module

    on = traced(settings)
    for module in (maintenance, traced_module):
        monkeypatch.setattr(module, "get_settings", lambda: on)
    MemoryClient(on, dispatch=False).remember("bot", "ann", "Prefers tea")
    with app_provider().get_tracer("test").start_as_current_span("operator") as outer:
        counts = maintenance.cycle.apply().get()

    (run,) = named(spans, "memoryd.maintenance.cycle")
    assert run.kind == trace.SpanKind.CONSUMER
    assert run.parent is not None and run.parent.span_id == outer.get_span_context().span_id
    attributes = dict(run.attributes or {})
    assert attributes["celery.task_name"] == "memoryd.maintenance.cycle"
    numbers = {k: v for k, v in counts.items() if isinstance(v, int | float)}
    assert numbers and {f"memoryd.result.{k}": v for k, v in numbers.items()}.items() <= (
        attributes.items()
    )
