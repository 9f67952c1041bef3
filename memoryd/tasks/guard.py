"""What a task shows when it fails on a bug: error_text, not the exception's message.

A failed task's error and traceback are kept by the result backend, shown by Flower and
logged by the worker; an exception's message may quote what users said (a fact, a turn,
a database row), so a bug is logged as its frames and re-raised as TaskFailed."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from celery.exceptions import SoftTimeLimitExceeded

from memoryd.errors import MemorydError, TaskFailed, TaskRejected, error_text, log_failure

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


def guarded(task: Callable[P, R]) -> Callable[P, R]:
    signature = inspect.signature(task)

    @functools.wraps(task)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            signature.bind(*args, **kwargs)
        except TypeError as exc:  # a message sent with other arguments: says which
            raise TaskRejected(f"{task.__name__}: {exc}") from None
        try:
            return task(*args, **kwargs)
        except (MemorydError, SoftTimeLimitExceeded):
            raise  # our own errors say only what is safe to say
        except Exception as exc:
            log_failure(log, f"{task.__name__} failed", exc)
            raise TaskFailed(f"{task.__name__}: unexpected {error_text(exc)}") from None

    return run
