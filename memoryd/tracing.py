"""OpenTelemetry spans (the `otel` extra), off unless MEMORYD_TRACING=true.

Off, a traced call pays one attribute check and gets NO_SPAN back: nothing of
OpenTelemetry is imported. On, spans go to the process's global tracer provider: the
application's own when it set one before memoryd's first span, else one memoryd installs,
exporting as the standard OTEL_* variables say (OTLP over HTTP by default).

Spans carry ids and counts only: never a turn's text, a query, a fact or an exception's
message (any of them may quote what users said), so a failed span records the error's
type alone.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from memoryd.settings import ServerSettings, Settings

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

log = logging.getLogger(__name__)

PREFIX = "memoryd."
# OpenTelemetry's gen_ai.usage.* attributes and the OpenAI usage fields they come from.
USAGE = (("input_tokens", "prompt_tokens"), ("output_tokens", "completion_tokens"))


class SpanLike(Protocol):
    """What memoryd's code does with a span: an OpenTelemetry span, or NO_SPAN."""

    def set_attribute(self, key: str, value: Any) -> None: ...

    def is_recording(self) -> bool: ...


class _NoSpan:
    """Tracing off: a context manager and span that record nothing, shared by all."""

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None

    def set_attribute(self, key: str, value: Any) -> None:
        return None

    def is_recording(self) -> bool:
        return False


NO_SPAN = _NoSpan()

_lock = threading.Lock()
_tracer: Tracer | None = None
_provider: Any = None  # the global provider _tracer came from
_installed: Any = None  # the TracerProvider memoryd installed, if it did


def span(
    settings: Settings, name: str, kind: str = "internal", /, **attributes: Any
) -> AbstractContextManager[SpanLike]:
    """A span around a block, the current span's child; `attributes` are ids and counts,
    named memoryd.<name> (None values left out). NO_SPAN when tracing is off."""
    if not settings.server.tracing:
        return NO_SPAN
    return _span(name, kind, _named(attributes), None)


def task_span(
    settings: ServerSettings, name: str, request: Any, **attributes: Any
) -> AbstractContextManager[SpanLike]:
    """A Celery task's span, the child of the span that sent it: the trace context
    travels in the message's headers (see `headers`). A task sent without one (by beat,
    or by a client not tracing) starts a trace; one run in-process (apply) continues
    its caller's."""
    if not settings.tracing:
        return NO_SPAN
    from opentelemetry import propagate, trace

    carried = propagate.extract(dict(getattr(request, "headers", None) or {}))
    # No trace context came with the message: the current one (None) goes on.
    parent = carried if trace.get_current_span(carried).get_span_context().is_valid else None
    named = _named(attributes)
    named["celery.task_name"] = name
    if task_id := getattr(request, "id", None):
        named["messaging.message.id"] = str(task_id)
    return _span(name, "consumer", named, parent)


def headers(settings: ServerSettings) -> dict[str, str] | None:
    """The current trace context as message headers (W3C traceparent, or what
    OTEL_PROPAGATORS names), for a task sent now; None when tracing is off."""
    if not settings.tracing:
        return None
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier or None


def record(span: SpanLike, values: Mapping[str, Any] | object, prefix: str = PREFIX) -> None:
    """The numbers and flags of `values` (a mapping, or an object's fields) as
    attributes; text and lists are left out."""
    if not span.is_recording():
        return
    fields = values if isinstance(values, Mapping) else vars(values)
    for key, value in fields.items():
        if isinstance(value, bool | int | float):
            span.set_attribute(prefix + key, value)


def record_llm_call(span: SpanLike, requested: str, response: Any) -> None:
    """The model asked for and the one that answered, and the tokens the answer's
    usage reports (OpenTelemetry's gen_ai.* names)."""
    if not span.is_recording():
        return
    span.set_attribute("gen_ai.request.model", requested)
    if model := getattr(response, "model", None):
        span.set_attribute("gen_ai.response.model", str(model))
    usage = getattr(response, "usage", None)
    if usage is not None:
        for name, field in USAGE:
            if isinstance(count := getattr(usage, field, None), int):
                span.set_attribute(f"gen_ai.usage.{name}", count)


def flush(timeout_millis: int = 5000) -> None:
    """Export what memoryd's own provider holds (a worker process ending); a provider
    the application installed is the application's to flush."""
    if _installed is not None:
        _installed.force_flush(timeout_millis)


def _named(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {PREFIX + k: v for k, v in attributes.items() if v is not None}


@contextmanager
def _span(name: str, kind: str, attributes: dict[str, Any], parent: Any) -> Iterator[SpanLike]:
    from opentelemetry.trace import SpanKind, Status, StatusCode

    with get_tracer().start_as_current_span(
        name,
        context=parent,
        kind=SpanKind[kind.upper()],
        attributes=attributes,
        record_exception=False,  # its message may quote what users said
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except BaseException as exc:
            current.set_attribute("error.type", type(exc).__qualname__)
            current.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
            raise


def get_tracer() -> Tracer:
    """memoryd's tracer from the global provider; the first call installs one when the
    application has not. Kept while the global provider stays the same one."""
    global _tracer, _provider
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if provider is not _provider or _tracer is None:
        with _lock:
            if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
                _install_provider()
            _provider = trace.get_tracer_provider()
            _tracer = _provider.get_tracer("memoryd")
    return _tracer


def _install_provider() -> None:
    """A provider of memoryd's own: service.name `memoryd` unless OTEL_SERVICE_NAME or
    OTEL_RESOURCE_ATTRIBUTES name one, spans batched to OTEL_TRACES_EXPORTER's exporter."""
    global _installed
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "memoryd"}))
    provider = TracerProvider(resource=resource)
    exporter = _exporter()
    if exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _installed = provider


def _exporter() -> Any:
    """OTEL_TRACES_EXPORTER: `otlp` (default: OTLP over HTTP, configured by the
    OTEL_EXPORTER_OTLP_* variables), `console` (stdout), or `none`."""
    choice = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
    if choice == "none":
        return None
    if choice == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if choice != "otlp":
        log.warning("OTEL_TRACES_EXPORTER=%s is not supported here; using otlp", choice)
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        log.warning("spans are not exported: pip install 'memoryd[otel]' for the OTLP exporter")
        return None
    return OTLPSpanExporter()
