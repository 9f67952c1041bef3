"""The chaos bench's own servers, which its scenarios may kill (bench/chaos_harness.py)."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from pathlib import Path

from sqlalchemy import create_engine, text

from testkit import hosts
from testkit.services import (
    PgBouncer,
    PostgresCluster,
    RabbitMQServer,
    RedisServer,
    ServiceUnavailable,
    declare_queues,
)


class Servers:
    """The bench's own PostgreSQL cluster, Redis server and (started when a scenario first
    asks for it) RabbitMQ node, which scenarios may kill. Where network namespaces can
    be made, the first two also listen on a virtual network's gateway, for the hosts."""

    def __init__(self, with_hosts: bool = True) -> None:
        """`with_hosts`: make the hosts' network (a job process that runs no hosts
        scenario makes none)."""
        self.folder = Path(tempfile.mkdtemp(prefix="chaos-servers-"))
        self.hosts_unavailable = hosts.unavailable() if with_hosts else "not in this process"
        self._network = None if self.hosts_unavailable else hosts.Network().start()
        gateway, cidr = (self._network.gateway, self._network.cidr) if self._network else ("", "")
        self.postgres = PostgresCluster(also_on=gateway, trusting=cidr).start()
        self.redis = RedisServer(self.folder / "redis", also_on=gateway).start()
        self._rabbitmq: RabbitMQServer | None = None
        self._pgbouncer: PgBouncer | None = None

    @property
    def pgbouncer(self) -> PgBouncer:
        """Started on first use, before PostgreSQL's server connections (10) run short;
        ServiceUnavailable (saying what to install) when pgbouncer is not installed."""
        if self._pgbouncer is None:
            upstream = ("127.0.0.1", self.postgres.port)
            self._pgbouncer = PgBouncer(upstream, server_connections=10).start()
        return self._pgbouncer

    @property
    def network(self) -> hosts.Network:
        if self._network is None:
            raise ServiceUnavailable(f"no worker hosts: {self.hosts_unavailable}")
        return self._network

    def hosts(self, count: int) -> list[hosts.Host]:
        """The network's first `count` hosts, made when first asked for."""
        while len(self.network.hosts) < count:
            self.network.add_host()
        return self.network.hosts[:count]

    @property
    def redis_url(self) -> str:
        return f"{self.redis.url}/0"

    @property
    def rabbitmq(self) -> RabbitMQServer:
        """ServiceUnavailable (saying what to install) when rabbitmq-server is not.

        The node holds memoryd's queues before any scenario runs, as a broker that has
        served a worker does, and has been stopped and started once since: RabbitMQ 3.10
        brings a quorum queue declared a moment before a crash back without a leader
        (README, "Which broker"), a fault of a broker's first seconds, not of a running
        deployment's."""
        if self._rabbitmq is None:
            node = RabbitMQServer(self.folder / "rabbitmq").start()
            declare_queues(f"{node.url}/")
            node.stop()
            self._rabbitmq = node.start()
        return self._rabbitmq

    @property
    def amqp_url(self) -> str:
        return f"{self.rabbitmq.url}/"

    def new_database(self) -> str:
        name = f"chaos_{uuid.uuid4().hex[:8]}"
        admin = create_engine(f"{self.postgres.server_url}/postgres", isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        return f"{self.postgres.server_url}/{name}"

    def close(self) -> None:
        if self._rabbitmq is not None:
            self._rabbitmq.stop()
        if self._pgbouncer is not None:
            self._pgbouncer.stop()
        self.redis.stop()
        self.postgres.remove()
        if self._network is not None:
            self._network.remove()
        shutil.rmtree(self.folder, ignore_errors=True)
