"""The worker's consumer: without Celery's native delayed delivery, and without gossip on
Redis.

On RabbitMQ with quorum queues, Celery ≥ 5.5 declares 28 more quorum queues and their
exchanges at every worker start so that tasks sent with a countdown or ETA wait in the
broker, and warns about each of memoryd's direct exchanges, which it cannot serve.
memoryd sends no task with a countdown or ETA (a retry after a failure waits in the database:
conversation_tables.py's retry_at), so those queues would only cost the broker a Raft group each.

Gossip binds a queue per worker to the events exchange, for its peers to reach it.
Redis deletes no queue when its consumer goes (RabbitMQ does), so every worker killed
there (the OOM killer, a lost node) would leave its queue bound, filled for good with
every other worker's events, turn contents among them. memoryd uses nothing gossip
gives: its watchdog pings through the worker's own direct queue, and events still go
out for Flower. However the worker is started (`memoryd worker`, `celery worker`).
"""

from __future__ import annotations

from typing import Any

from celery.worker.consumer import Consumer as CeleryConsumer
from celery.worker.consumer.gossip import Gossip as CeleryGossip

from memoryd.worker.config import is_redis

DELAYED_DELIVERY_STEP = "celery.worker.consumer.delayed_delivery:DelayedDelivery"
GOSSIP_STEP = "celery.worker.consumer.gossip:Gossip"


class Gossip(CeleryGossip):  # type: ignore[misc]
    def compatible_transport(self, app: Any) -> bool:
        return not is_redis(app.conf.broker_url or "") and bool(super().compatible_transport(app))


class Consumer(CeleryConsumer):  # type: ignore[misc]
    class Blueprint(CeleryConsumer.Blueprint):  # type: ignore[misc]
        default_steps = [
            f"{__name__}:Gossip" if step == GOSSIP_STEP else step
            for step in CeleryConsumer.Blueprint.default_steps
            if step != DELAYED_DELIVERY_STEP
        ]
