"""Each queue has its own binding on the broker: a message sent to one queue's exchange
with its routing key lands in that queue and no other (real Redis, RabbitMQ and
filesystem brokers, a real worker). On RabbitMQ the queues are quorum queues and every
publish is confirmed."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator
from pathlib import Path

import amqp
import pytest
from celery import Celery
from kombu import Connection, Exchange, Queue  # type: ignore[attr-defined]
from kombu.transport import filesystem

from memoryd.models.db import session_scope
from memoryd.settings import Settings
from memoryd.worker import app as celery_app
from memoryd.worker import make_celery
from memoryd.worker.app import TASK_MODULES
from memoryd.worker.config import EXTRACTION_QUEUE, QUEUES
from memoryd.worker.watchdog import PING_TASK
from testkit.workers import start_worker, wait_until
from tests.conftest import BACKENDS
from tests.factories import count_turns, turn_item

INGEST_TASK = "memoryd.ingest_turns"


@pytest.fixture(params=[*BACKENDS, "rabbitmq"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def app(settings: Settings) -> Iterator[Celery]:
    # The filesystem transport remembers, per process, the bindings it declared and
    # declares none twice: an earlier test's, in another folder, must not count here.
    filesystem.Transport.global_state.clear()
    celery = make_celery(settings)
    yield celery
    celery.close()


def declare(conn: Connection, queues: list[Queue]) -> None:
    for queue in queues:
        queue(conn.default_channel).declare()


def drain(conn: Connection) -> dict[str, int]:
    """How many messages each of memoryd's queues holds; they are taken off it."""
    counts = {}
    for name in QUEUES:
        queue = Queue(name, no_declare=True)(conn.default_channel)
        counts[name] = 0
        while queue.get(no_ack=True) is not None:
            counts[name] += 1
    return counts


def as_older_versions_declared() -> list[Queue]:
    """Every queue bound to the default queue's exchange with its routing key."""
    return [
        Queue(name, Exchange(EXTRACTION_QUEUE), routing_key=EXTRACTION_QUEUE) for name in QUEUES
    ]


def test_a_message_sent_to_one_queues_binding_lands_in_that_queue_alone(app: Celery) -> None:
    with app.connection_for_write() as conn:
        declare(conn, list(app.amqp.queues.values()))
        for name in QUEUES:
            queue = app.amqp.queues[name]
            conn.Producer().publish(
                {"for": name}, exchange=queue.exchange, routing_key=queue.routing_key
            )
            assert drain(conn) == {other: int(other == name) for other in QUEUES}


# Where memoryd sends each of its tasks: a task added later must be placed here too.
QUEUE_OF_TASK = {
    INGEST_TASK: "extraction",
    "memoryd.extract_session": "extraction",
    "memoryd.maintenance.sweep": "maintenance",
    "memoryd.maintenance.cycle": "maintenance",
    "memoryd.maintenance.compress_sessions": "maintenance",
    "memoryd.embed_memories": "embedding",
}


def test_every_task_sent_lands_in_its_own_queue_alone(app: Celery) -> None:
    for module in TASK_MODULES:
        importlib.import_module(module)
    sent_by_name = {name for name in celery_app.tasks if name.startswith("memoryd.")}
    assert sent_by_name - {PING_TASK} == set(QUEUE_OF_TASK)  # the ping goes to a worker
    with app.connection_for_write() as conn:
        declare(conn, list(app.amqp.queues.values()))
        for task, queue in QUEUE_OF_TASK.items():
            app.send_task(task, connection=conn, ignore_result=True)
            assert drain(conn) == {name: int(name == queue) for name in QUEUES}, task


def test_a_starting_worker_removes_the_bindings_older_versions_left(
    backend: str, settings: Settings, app: Celery, tmp_path: Path
) -> None:
    """A turn sent to the extraction queue's exchange, as a producer in another language
    may send it, reaches extraction only, on a broker an older version declared."""
    if backend == "rabbitmq":
        pytest.skip("older versions declared classic queues: moving to quorum ones deletes them")
    with app.connection_for_write() as conn:
        declare(conn, as_older_versions_declared())
        conn.Producer().publish({}, exchange=EXTRACTION_QUEUE, routing_key=EXTRACTION_QUEUE)
        assert drain(conn) == dict.fromkeys(QUEUES, 1)  # what older versions left
    worker = start_worker(settings, tmp_path, queues=EXTRACTION_QUEUE)
    try:
        wait_until(lambda: "ready." in worker.log(), 60, what="the worker", procs=(worker,))
        payload = {"turns": [turn_item(0, turn_key="via-exchange")]}
        app.send_task(
            INGEST_TASK, args=[payload], exchange=EXTRACTION_QUEUE, routing_key=EXTRACTION_QUEUE
        )
        wait_until(lambda: stored(settings) == 1, 30, what="the turn", procs=(worker,))
    finally:
        worker.stop()
    with app.connection_for_write() as conn:
        assert drain(conn) == dict.fromkeys(QUEUES, 0)


def stored(settings: Settings) -> int:
    with session_scope(settings.storage) as session:
        return count_turns(session)


def test_a_fresh_filesystem_broker_has_each_exchange_file_whole(tmp_path: Path) -> None:
    """The filesystem transport creates an exchange's file empty before it fills it: two
    workers starting at once on a fresh folder, one of them read "" and never started.
    The configuration makes every queue's exchange file whole before any worker binds."""
    settings = Settings(data_dir=tmp_path, broker_url="filesystem://")
    make_celery(settings)
    control = settings.storage.broker_folder.resolve() / "control"
    assert {p.name: p.read_text() for p in control.glob("*.exchange")} == {
        f"{name}.exchange": "[]" for name in QUEUES
    }
    assert not [p for p in control.iterdir() if p.name.startswith(".")]  # no drafts left


def test_workers_binding_to_a_fresh_filesystem_exchange_at_once_leave_its_table_whole(
    tmp_path: Path,
) -> None:
    """Each worker binds its own queue to the broadcast (pidbox) exchange as it starts.
    kombu's transport let two binders both truncate a fresh exchange's table and write
    over each other, leaving one's bytes after the other's ("…pidbox"]]]"): every later
    broadcast then failed to read it. Here four binders race on each of 100 fresh
    exchanges, then unbind, while a reader reads the tables without pause."""
    settings = Settings(data_dir=tmp_path, broker_url="filesystem://")
    options = make_celery(settings).conf.broker_transport_options
    exchanges = [f"pidbox{i}" for i in range(100)]
    queues = [f"worker{i}@host" for i in range(4)]
    problems: list[BaseException] = []
    finished = threading.Event()

    def bind_each(queue: str) -> None:
        with Connection(settings.storage.broker_url, transport_options=options) as conn:
            channel = conn.channel()
            try:
                for exchange in exchanges:
                    channel._queue_bind(exchange, "", "", queue)
                for exchange in exchanges[::2]:
                    channel._delete(queue, exchange, "", "")
            except BaseException as exc:  # surfaced below
                problems.append(exc)

    def read_all() -> None:
        with Connection(settings.storage.broker_url, transport_options=options) as conn:
            channel = conn.channel()
            try:
                while not finished.is_set():
                    for exchange in exchanges:
                        channel.get_table(exchange)
            except BaseException as exc:  # surfaced below
                problems.append(exc)

    reader = threading.Thread(target=read_all)
    binders = [threading.Thread(target=bind_each, args=(queue,)) for queue in queues]
    for thread in [reader, *binders]:
        thread.start()
    for thread in binders:
        thread.join(timeout=120)
    finished.set()
    reader.join(timeout=30)
    assert not problems, problems[:3]
    with Connection(settings.storage.broker_url, transport_options=options) as conn:
        channel = conn.channel()
        tables = {e: sorted(row.queue for row in channel.get_table(e)) for e in exchanges}
    assert tables == {e: [] if i % 2 == 0 else queues for i, e in enumerate(exchanges)}


def test_a_filesystem_message_is_read_whole_while_it_is_written(tmp_path: Path) -> None:
    """kombu's filesystem transport creates a message's file under the name consumers
    look for and only then writes it: a consumer listing the folder meanwhile took the
    file empty (a lost trigger and a worker's error). memoryd's transport renames each
    file into place once written. Here a consumer polls without pause while four
    threads publish."""
    settings = Settings(data_dir=tmp_path, broker_url="filesystem://")
    options = {**make_celery(settings).conf.broker_transport_options, "polling_interval": 0}
    sent = [f"message {i} " + "x" * 200 for i in range(4000)]
    received: list[str] = []
    errors: list[BaseException] = []

    def consume() -> None:
        with Connection(settings.storage.broker_url, transport_options=options) as conn:
            queue = conn.SimpleQueue("whole")
            try:
                while len(received) < len(sent):
                    message = queue.get(timeout=30)
                    received.append(message.payload)
                    message.ack()
            except BaseException as exc:  # surfaced below
                errors.append(exc)

    def publish(share: list[str]) -> None:
        with Connection(settings.storage.broker_url, transport_options=options) as conn:
            queue = conn.SimpleQueue("whole")
            for body in share:
                queue.put(body)

    with Connection(settings.storage.broker_url, transport_options=options) as conn:
        conn.SimpleQueue("whole").close()  # its exchange's file, before the threads race
    reader = threading.Thread(target=consume)
    writers = [threading.Thread(target=publish, args=(sent[i::4],)) for i in range(4)]
    for thread in [reader, *writers]:
        thread.start()
    for thread in [*writers, reader]:
        thread.join(timeout=120)
    assert not errors, errors
    assert sorted(received) == sorted(sent)


@pytest.mark.parametrize("backend", ["rabbitmq"])
def test_on_rabbitmq_the_queues_are_durable_quorum_queues(app: Celery) -> None:
    """The broker holds them as quorum queues: declaring one as a classic queue is refused."""
    with app.connection_for_write() as conn:
        declare(conn, list(app.amqp.queues.values()))
        for name in QUEUES:
            channel = conn.channel()
            with pytest.raises(amqp.exceptions.PreconditionFailed, match="x-queue-type"):
                channel.queue_declare(name, durable=True, auto_delete=False)
    assert all(q.durable and not q.auto_delete for q in app.amqp.queues.values())
    assert app.conf.task_acks_late and app.conf.task_reject_on_worker_lost


@pytest.mark.parametrize("backend", ["rabbitmq"])
def test_on_rabbitmq_a_publish_the_broker_refuses_raises(app: Celery) -> None:
    """Publisher confirms: a message RabbitMQ does not take (here a queue that refuses
    every message) fails at the sender instead of vanishing, so a trigger is either in a
    queue or known to be missing (and the sweep sends it again)."""
    full = Queue(
        "memoryd_test_full",
        Exchange("memoryd_test_full", type="direct"),
        routing_key="full",
        queue_arguments={"x-max-length": 0, "x-overflow": "reject-publish"},
    )
    with app.connection_for_write() as conn:
        declare(conn, [full])
        try:
            with pytest.raises(amqp.exceptions.MessageNacked):
                app.amqp.Producer(conn).publish(
                    {}, exchange=full.exchange, routing_key="full", declare=[full]
                )
        finally:
            full(conn.channel()).delete()
