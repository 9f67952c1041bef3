"""Celery workers: threads, time limits, start-up."""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from memoryd.settings.part import Part


class WorkerSettings(Part):
    worker_concurrency: int = Field(16, ge=1, description="Threads per worker process")
    consumer_watchdog_seconds: float = Field(
        120.0, ge=0, description="A worker receiving nothing this long pings itself; 0 = off"
    )
    startup_wait_seconds: float = Field(
        30.0, ge=0, description="How long a worker or `migrate` waits for the database"
    )
    task_soft_time_limit_seconds: float = Field(
        600.0,
        gt=0,
        description="A task past this starts no new batch; a batch it interrupts (prefork "
        "pool) gives its turns back without counting an attempt",
    )
    task_time_limit_seconds: float = Field(
        660.0,
        gt=0,
        description="Past this the prefork pool kills a task's process; its lease then "
        "lapses and another worker takes the turns",
    )

    @model_validator(mode="after")
    def _limits_in_order(self) -> Self:
        if self.task_time_limit_seconds <= self.task_soft_time_limit_seconds:
            raise ValueError(
                "MEMORYD_TASK_TIME_LIMIT_SECONDS must be above "
                "MEMORYD_TASK_SOFT_TIME_LIMIT_SECONDS, so a task can stop on its own first"
            )
        return self
