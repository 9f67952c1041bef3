"""Removing the bindings older versions left on the broker.

Their queues had no exchange of their own, so Celery bound every one of them to the
default queue's exchange (`extraction`) with its routing key: a message sent there landed
in the maintenance and embedding queues as well. Queues now have their own
(worker/config.py), but a broker keeps a binding until it is removed, so a worker removes
these as it starts. Kombu's unbind leaves in place what its Redis and filesystem transports
stored, so those are removed where the transports keep them.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from celery import Celery

from memoryd.worker.config import EXTRACTION_QUEUE, QUEUES

log = logging.getLogger(__name__)

LEGACY_EXCHANGE = LEGACY_ROUTING_KEY = EXTRACTION_QUEUE
# The queues that must not hear what is sent to the extraction queue's exchange.
OTHER_QUEUES = tuple(name for name in QUEUES if name != EXTRACTION_QUEUE)


def remove_legacy_bindings(app: Celery) -> None:
    """Unbind every queue but extraction from (`extraction`, `extraction`), if bound."""
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        kind = conn.transport.driver_type
        if kind == "amqp":
            _remove_from_rabbitmq(conn)
        elif kind == "redis":
            _remove_from_redis(channel)
        elif kind == "filesystem":
            _remove_from_files(channel)


def _remove_from_rabbitmq(conn: Any) -> None:
    # RabbitMQ closes a channel on which a queue that does not exist (a worker that
    # consumes extraction alone never declared the others) is unbound: one channel each.
    for queue in OTHER_QUEUES:
        channel = conn.channel()
        try:
            channel.queue_unbind(
                queue=queue, exchange=LEGACY_EXCHANGE, routing_key=LEGACY_ROUTING_KEY
            )
        except conn.channel_errors as exc:
            log.debug("queue %s: %s", queue, exc)
        finally:
            if channel.is_open:
                channel.close()


def _remove_from_redis(channel: Any) -> None:
    # The transport keeps an exchange's bindings as a set of "key<sep>pattern<sep>queue"
    # (and, in recent versions, a second set of the permanent ones).
    members = [channel.sep.join([LEGACY_ROUTING_KEY, "", queue]) for queue in OTHER_QUEUES]
    prefixes = [channel.keyprefix_queue, getattr(channel, "keyprefix_binding_permanent", None)]
    for prefix in filter(None, prefixes):
        channel.client.srem(prefix % LEGACY_EXCHANGE, *members)


def _remove_from_files(channel: Any) -> None:
    # The transport keeps an exchange's bindings in a JSON list of [key, pattern, queue],
    # read and written under an exclusive lock of the file.
    from kombu.transport.filesystem import LOCK_EX, lock, unlock

    path = channel.control_folder / f"{LEGACY_EXCHANGE}.exchange"
    if not path.exists():
        return
    with path.open("r+") as file:
        lock(file, LOCK_EX)
        try:
            bindings = json.loads(file.read() or "[]")
            kept = [
                b for b in bindings if not (b[0] == LEGACY_ROUTING_KEY and b[2] in OTHER_QUEUES)
            ]
            if kept != bindings:
                file.seek(0)
                file.truncate()
                file.write(json.dumps(kept))
        finally:
            unlock(file)
