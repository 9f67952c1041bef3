"""Celery configuration derived from Settings: queues, routes, reliability, events, beat."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kombu import Exchange, Queue  # type: ignore[attr-defined]

from memoryd.settings import MaintenanceSettings, Settings
from memoryd.worker.filesystem_broker import filesystem_options

EXTRACTION_QUEUE = "extraction"
MAINTENANCE_QUEUE = "maintenance"
EMBEDDING_QUEUE = "embedding"
QUEUES = (EXTRACTION_QUEUE, MAINTENANCE_QUEUE, EMBEDDING_QUEUE)  # what a worker consumes
EMBED_TASK = "memoryd.embed_memories"

TASK_ROUTES = {
    "memoryd.ingest_turns": {"queue": EXTRACTION_QUEUE},
    "memoryd.extract_session": {"queue": EXTRACTION_QUEUE},
    "memoryd.maintenance.*": {"queue": MAINTENANCE_QUEUE},
    EMBED_TASK: {"queue": EMBEDDING_QUEUE},
}


AMQP_SCHEMES = ("amqp", "amqps", "pyamqp")
# On RabbitMQ memoryd's queues are quorum queues: durable, replicated by Raft on a cluster,
# and what RabbitMQ recommends for messages that must not be lost. They hold the same
# messages as classic ones; what they lack (exclusive or auto-delete queues, global QoS,
# priorities before RabbitMQ 4) memoryd does not use, and Celery switches to per-consumer
# prefetch when it sees one (worker_detect_quorum_queues).
QUORUM = {"x-queue-type": "quorum"}


def is_redis(broker_url: str) -> bool:
    return broker_url.startswith(("redis://", "rediss://"))


def is_amqp(broker_url: str) -> bool:
    return broker_url.split("://", 1)[0].lower() in AMQP_SCHEMES


def task_queues(quorum: bool = False) -> tuple[Queue, ...]:
    """Each queue bound to a direct exchange of its name with its name as routing key, as
    Celery binds a queue it is only told the name of (another project's Celery client
    sending to `extraction` declares the same). Without an exchange of their own, every
    queue was bound to the default queue's exchange and key, so a message sent there
    landed in all of them. `quorum`: declared as RabbitMQ quorum queues (durable)."""
    arguments = dict(QUORUM) if quorum else None
    return tuple(
        Queue(
            name,
            Exchange(name, type="direct", durable=True),
            routing_key=name,
            durable=True,
            queue_arguments=arguments,
        )
        for name in QUEUES
    )


def beat_schedule(settings: MaintenanceSettings) -> dict[str, dict[str, Any]]:
    every = timedelta
    return {
        "sweep": {
            "task": "memoryd.maintenance.sweep",
            "schedule": every(seconds=settings.sweep_interval_seconds),
        },
        "maintenance-cycle": {
            "task": "memoryd.maintenance.cycle",
            "schedule": every(seconds=settings.maintenance_interval_seconds),
        },
        "compress-sessions": {
            "task": "memoryd.maintenance.compress_sessions",
            "schedule": every(seconds=settings.compress_interval_seconds),
        },
    }


def celery_config(settings: Settings) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "broker_url": settings.storage.broker_url,
        "result_backend": settings.storage.result_backend,
        "task_ignore_result": settings.storage.result_backend is None,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "timezone": "UTC",
        "enable_utc": True,
        # Tasks are idempotent, so a message is acknowledged only after it ran, and a
        # worker that dies mid-task gives it back to the queue.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        # Every task is bounded. The prefork pool enforces both limits; under threads,
        # extraction checks the soft one between batches (extraction/batch.py).
        "task_soft_time_limit": settings.worker.task_soft_time_limit_seconds,
        "task_time_limit": settings.worker.task_time_limit_seconds,
        # A queue of its own per worker: the consumer watchdog pings itself through it.
        "worker_direct": True,
        # Flower shows every task: sent, started, succeeded, failed.
        "worker_send_task_events": True,
        "task_send_sent_event": True,
        "task_track_started": True,
        "task_default_queue": EXTRACTION_QUEUE,
        "task_queues": task_queues(quorum=is_amqp(settings.storage.broker_url)),
        "task_routes": TASK_ROUTES,
        "beat_schedule": beat_schedule(settings.maintenance),
        "broker_connection_retry_on_startup": True,
        "worker_concurrency": settings.worker.worker_concurrency,
        # No delay queues on RabbitMQ (memoryd sends no countdown or ETA), no gossip on
        # Redis (a killed worker's queue would stay bound): worker/consumer.py.
        "worker_consumer": "memoryd.worker.consumer:Consumer",
    }
    if settings.storage.broker_url.startswith("filesystem://"):
        folder = settings.storage.broker_folder
        try:
            conf["broker_transport_options"] = filesystem_options(folder, QUEUES)
        except OSError as exc:  # the folder or one of its own: never a worker without them
            raise settings.storage.unusable(folder, exc) from None
    elif is_redis(settings.storage.broker_url):
        # An unacknowledged message returns to the queue after this long.
        conf["broker_transport_options"] = {"visibility_timeout": 3600}
    elif is_amqp(settings.storage.broker_url):
        conf.update(amqp_config())
    return conf


def amqp_config() -> dict[str, Any]:
    """RabbitMQ: a publish returns once the broker has taken the message (publisher
    confirms; a refused one raises, and a trigger that never got there is re-sent by the
    sweep), messages persist in durable quorum queues, and a worker consumes with a
    prefetch per consumer, which quorum queues require."""
    return {
        "broker_transport_options": {"confirm_publish": True},
        "task_default_delivery_mode": "persistent",
        "worker_detect_quorum_queues": True,
    }
