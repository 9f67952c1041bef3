"""A task's span (MEMORYD_TRACING): the child of whatever sent the task, its trace
context read from the message's headers, so an extraction joins the trace of the
enqueue that triggered it. Its attributes are the task's id and the numbers it returns."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from celery import current_task

from memoryd import tracing
from memoryd.settings import get_settings

P = ParamSpec("P")
R = TypeVar("R")


def traced(task: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(task)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        settings = get_settings()
        if not settings.server.tracing:
            return task(*args, **kwargs)
        name = getattr(current_task, "name", None) or f"memoryd.{task.__name__}"
        request = getattr(current_task, "request", None)
        with tracing.task_span(settings.server, name, request) as span:
            result = task(*args, **kwargs)
            tracing.record(span, _counts(result), prefix="memoryd.result.")
        return result

    return run


def _counts(result: Any) -> dict[str, Any]:
    return result if isinstance(result, dict) else {}
