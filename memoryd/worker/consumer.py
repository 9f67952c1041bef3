"""The worker's consumer, without Celery's native delayed delivery.

On RabbitMQ with quorum queues, Celery ≥ 5.5 declares 28 more quorum queues and their
exchanges at every worker start so that tasks sent with a countdown or ETA wait in the
broker, and warns about each of memoryd's direct exchanges, which it cannot serve.
memoryd sends no task with a countdown or ETA (a retry after a failure waits in the database:
conversation_tables.py's retry_at), so those queues would only cost the broker a Raft group each.
"""

from __future__ import annotations

from celery.worker.consumer import Consumer as CeleryConsumer

DELAYED_DELIVERY_STEP = "celery.worker.consumer.delayed_delivery:DelayedDelivery"


class Consumer(CeleryConsumer):  # type: ignore[misc]
    class Blueprint(CeleryConsumer.Blueprint):  # type: ignore[misc]
        default_steps = [
            step for step in CeleryConsumer.Blueprint.default_steps if step != DELAYED_DELIVERY_STEP
        ]
