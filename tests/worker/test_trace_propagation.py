"""The trace context crosses the broker: a real worker's extraction joins the trace of
the enqueue that triggered it. The worker exports as a deployment would, with the
provider memoryd installs and the OTLP/HTTP exporter, to a collector in this test."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from memoryd.client import MemoryClient
from testkit.fakellm import FakeLLM
from testkit.workers import start_worker, wait_until
from tests.conftest import make_settings, with_llm
from tests.test_tracing import EXPORTER, SAID, app_provider, named, turns

pytestmark = pytest.mark.slow


@dataclass
class Received:
    name: str
    trace_id: int
    span_id: int
    parent_span_id: int | None
    attributes: dict[str, Any]
    service: str


class Collector:
    """An OTLP/HTTP trace receiver on loopback: what exporters post to /v1/traces."""

    def __init__(self) -> None:
        self.spans: list[Received] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                collector.add(ExportTraceServiceRequest.FromString(body))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def add(self, request: ExportTraceServiceRequest) -> None:
        for resource_spans in request.resource_spans:
            resource = _values(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    parent = int.from_bytes(span.parent_span_id) if span.parent_span_id else None
                    received = Received(
                        span.name,
                        int.from_bytes(span.trace_id),
                        int.from_bytes(span.span_id),
                        parent,
                        _values(span.attributes),
                        str(resource.get("service.name")),
                    )
                    self.spans.append(received)

    def named(self, name: str) -> list[Received]:
        return [s for s in list(self.spans) if s.name == name]


def _values(attributes: Any) -> dict[str, Any]:
    out = {}
    for item in attributes:
        kind = item.value.WhichOneof("value")
        out[item.key] = getattr(item.value, kind) if kind else None
    return out


@pytest.fixture
def collector() -> Iterator[Collector]:
    receiver = Collector()
    yield receiver
    receiver.server.shutdown()
    receiver.server.server_close()


def test_an_extraction_joins_the_trace_of_the_enqueue_that_triggered_it(
    backend: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    fake_llm: FakeLLM,
    collector: Collector,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The worker's environment: OTLP to the collector, batches exported every 0.1 s.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", collector.endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    base = make_settings(backend, tmp_path, request, batch_size=2, tracing=True)
    settings = with_llm(base, fake_llm, extraction_model="fake-extractor")
    chat_backend = app_provider().get_tracer("chat-backend")  # this process: the app's
    EXPORTER.clear()
    worker = start_worker(settings, tmp_path)
    try:
        with chat_backend.start_as_current_span("chat-request") as outer:
            client = MemoryClient(settings)
            assert client.enqueue_turns(turns()).dispatched_sessions == 1  # a full batch
        client.flush()
        wait_until(
            lambda: collector.named("memoryd.extract_session"),
            60,
            what="the worker's task span at the collector",
            procs=(worker,),
        )
    finally:
        worker.stop()

    trace_id = outer.get_span_context().trace_id
    (enqueue,) = named(EXPORTER, "memoryd.enqueue")
    assert enqueue.context.trace_id == trace_id
    (task,) = collector.named("memoryd.extract_session")
    (batch,) = collector.named("memoryd.extract_batch")
    calls = collector.named("memoryd.llm.chat")
    # One trace: the chat request → enqueue → (broker) → the task → its batch → the call.
    assert task.trace_id == batch.trace_id == trace_id
    assert task.parent_span_id == enqueue.context.span_id
    assert batch.parent_span_id == task.span_id
    assert calls and {(c.trace_id, c.parent_span_id) for c in calls} == {(trace_id, batch.span_id)}
    assert calls[0].attributes["gen_ai.request.model"] == "fake-extractor"
    assert calls[0].attributes["gen_ai.usage.input_tokens"] > 0
    assert task.attributes["celery.task_name"] == "memoryd.extract_session"
    assert task.attributes["memoryd.result.created"] >= 1
    assert batch.attributes["memoryd.session_id"] == "s1"
    assert {s.service for s in collector.spans} == {"memoryd"}
    assert SAID.lower() not in repr([s.attributes for s in collector.spans]).lower()
