"""Throwaway PostgreSQL, Redis and RabbitMQ servers on spare ports, in a folder of their own.

The test suite starts them when the machine's own servers are not running; the chaos
bench always does, because it kills and restarts them. Each is a real server binary
(Debian's postgresql, redis-server and rabbitmq-server packages); nothing is mocked.
"""

from __future__ import annotations

import csv
import glob
import io
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

POSTGRES_USER = "postgres"  # initdb refuses to run as root: the cluster runs as this user


class ServiceUnavailable(RuntimeError):
    """A server is not running and cannot be started here; the message says what to run."""


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def spare_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(predicate: object, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise ServiceUnavailable(f"{what} did not come up within {seconds:.0f} s")


class RedisServer:
    """`redis-server` on a spare port, keeping nothing on disk."""

    def __init__(self, folder: Path, port: int | None = None, also_on: str = "") -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise ServiceUnavailable(
                "Redis is not running on 127.0.0.1:6379 and redis-server is not installed: "
                "run `apt-get install redis-server`, or start Redis and set "
                "MEMORYD_TEST_REDIS=redis://host:port"
            )
        self.binary = binary
        self.folder = folder
        self.port = port or spare_port()
        self.also_on = also_on  # another address to listen on (testkit/hosts.py's gateway)
        self.process: subprocess.Popen[bytes] | None = None
        folder.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> RedisServer:
        log = (self.folder / "redis.log").open("ab")
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                *filter(None, ["127.0.0.1", self.also_on]),
                "--protected-mode",
                "no" if self.also_on else "yes",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        _wait(lambda: port_open("127.0.0.1", self.port), 20, "redis-server")
        return self

    def kill(self) -> None:
        """SIGKILL: everything it held (queued messages included) is gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=20)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise ServiceUnavailable(
            "PostgreSQL is not running on 127.0.0.1:5432 and its server is not installed: "
            "run `apt-get install postgresql postgresql-contrib`, or start PostgreSQL and set "
            "MEMORYD_TEST_PG=postgresql+psycopg://user@host:port"
        )
    return Path(found[-1]).parent


class PostgresCluster:
    """A PostgreSQL cluster made by initdb in a fresh temporary folder, trust auth, on a
    spare port. Run as root, the server runs as the `postgres` user, so the folder sits
    directly in the system's temporary directory where that user can reach it."""

    def __init__(self, port: int | None = None, also_on: str = "", trusting: str = "") -> None:
        """`also_on`: another address to listen on; `trusting`: a network (a CIDR) whose
        clients are let in (testkit/hosts.py's gateway and its hosts)."""
        self.bin = _pg_bin()
        self.also_on = also_on
        self.trusting = trusting
        self.folder = Path(tempfile.mkdtemp(prefix="memoryd-pg-"))
        self.data = self.folder / "pgdata"
        self.port = port or spare_port()
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            pwd.getpwnam(POSTGRES_USER)  # KeyError: no such user, a clear enough failure
            shutil.chown(self.folder, POSTGRES_USER)
            self._as_user = ["runuser", "-u", POSTGRES_USER, "--"]

    @property
    def server_url(self) -> str:
        """SQLAlchemy URL of the server, without a database name."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}"

    def _run(self, *args: str) -> None:
        subprocess.run(
            [*self._as_user, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )

    def start(self) -> PostgresCluster:
        if not self.data.exists():
            self._run(
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
            )
            if self.trusting:
                with (self.data / "pg_hba.conf").open("a") as hba:
                    hba.write(f"host all all {self.trusting} trust\n")
        listen = ",".join(filter(None, ["127.0.0.1", self.also_on]))
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.folder / "pg.log"),
            "-w",
            "-t",
            "60",
            "-o",
            # fsync=off is safe for what the tests do (the server crashes, the machine does
            # not); a commit must survive a crash, so synchronous_commit stays on.
            f"-p {self.port} -h {listen} -k {self.folder} -c fsync=off -c max_connections=300",
            "start",
        )
        _wait(lambda: port_open("127.0.0.1", self.port), 30, "PostgreSQL")
        return self

    def stop(self, mode: str = "fast") -> None:
        """`fast` disconnects every client and shuts down cleanly; `immediate` is a crash."""
        if (self.data / "postmaster.pid").exists():
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, mode: str = "immediate") -> None:
        self.stop(mode)
        self.start()

    def remove(self) -> None:
        """Stop the server and delete the cluster."""
        self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)


class PgBouncer:
    """Debian's PgBouncer on a spare port in transaction pooling mode, in front of the
    PostgreSQL server at `upstream` (host, port), with few server connections, so that
    the transactions of many clients take turns on each of them, as in production.
    `also_on`: another address to listen on (testkit/hosts.py's gateway)."""

    def __init__(
        self, upstream: tuple[str, int], server_connections: int = 3, also_on: str = ""
    ) -> None:
        binary = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin")
        if binary is None:
            raise ServiceUnavailable(
                "pgbouncer is not installed: run `apt-get install pgbouncer` (the tests of "
                "memoryd behind a transaction pooler start one of their own)"
            )
        self.binary = binary
        self.upstream = upstream
        self.server_connections = server_connections
        self.also_on = also_on
        self.folder = Path(tempfile.mkdtemp(prefix="memoryd-pgbouncer-"))
        self.port = spare_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._as_user: list[str] = []
        if os.geteuid() == 0:  # it refuses to run as root
            shutil.chown(self.folder, POSTGRES_USER)
            self._as_user = ["-u", POSTGRES_USER]

    def server_url(self) -> str:
        """SQLAlchemy URL of the pooler, without a database name (any name passes on)."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}"

    def start(self) -> PgBouncer:
        host, port = self.upstream
        (self.folder / "users.txt").write_text('"postgres" ""\n')
        config = self.folder / "pgbouncer.ini"
        listen = ",".join(filter(None, ["127.0.0.1", self.also_on]))
        config.write_text(
            "[databases]\n"
            f"* = host={host} port={port}\n"
            "[pgbouncer]\n"
            f"listen_addr = {listen}\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.folder / 'users.txt'}\n"
            "pool_mode = transaction\nstats_users = postgres\n"
            f"default_pool_size = {self.server_connections}\nmax_client_conn = 1000\n"
            f"logfile = {self.folder / 'pgbouncer.log'}\n"
        )
        self.process = subprocess.Popen(
            [self.binary, *self._as_user, str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        _wait(lambda: port_open("127.0.0.1", self.port), 20, "pgbouncer")
        return self

    def stats(self, database: str) -> dict[str, int]:
        """Its counters for `database` since it started (SHOW STATS on its console):
        transactions, queries, and the microseconds clients waited for a server
        connection (`total_wait_time`). Empty when it never served that database."""
        psql = shutil.which("psql") or str(_pg_bin() / "psql")
        console = ["-h", "127.0.0.1", "-p", str(self.port), "-U", POSTGRES_USER, "-d", "pgbouncer"]
        out = subprocess.run(
            [psql, *console, "--csv", "-c", "SHOW STATS"],
            check=True,
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout
        for row in csv.DictReader(io.StringIO(out)):
            if row["database"] == database:
                return {k: int(v) for k, v in row.items() if k != "database"}
        return {}

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=20)
        shutil.rmtree(self.folder, ignore_errors=True)


RABBITMQ_BIN = Path("/usr/lib/rabbitmq/bin")  # Debian's rabbitmq-server package
RABBITMQ_MISSING = (
    "RabbitMQ is not running on 127.0.0.1:5672 and rabbitmq-server is not installed: run "
    "`apt-get install rabbitmq-server`, or start RabbitMQ and set "
    "MEMORYD_TEST_AMQP_URL=amqp://user:password@host:port"
)


def rabbitmq_bin() -> Path:
    if (RABBITMQ_BIN / "rabbitmq-server").exists():
        return RABBITMQ_BIN
    binary = shutil.which("rabbitmq-server") or shutil.which("rabbitmq-server", path="/usr/sbin")
    if binary is None:
        raise ServiceUnavailable(RABBITMQ_MISSING)
    return Path(binary).resolve().parent


class RabbitMQServer:
    """A RabbitMQ node of its own: its own node name, AMQP and distribution ports, data,
    logs, configuration and Erlang cookie (HOME), all in a temporary folder, so it never
    meets the machine's node. It registers with the machine's epmd (started if none
    runs: epmd is the host's shared Erlang name service). Messages in durable queues
    survive `kill`, as on a production broker."""

    def __init__(self, folder: Path | None = None) -> None:
        self.bin = rabbitmq_bin()
        self.folder = folder or Path(tempfile.mkdtemp(prefix="memoryd-rabbitmq-"))
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = spare_port()
        self.dist_port = spare_port()
        self.node = f"memoryd{self.port}@localhost"
        self.process: subprocess.Popen[bytes] | None = None
        (self.folder / "rabbitmq.conf").write_text(
            f"listeners.tcp.1 = 127.0.0.1:{self.port}\nloopback_users = none\n"
        )
        (self.folder / "enabled_plugins").write_text("[].\n")
        (self.folder / "rabbitmq-env.conf").write_text("")  # not the machine's node's
        cookie = self.folder / ".erlang.cookie"
        cookie.write_text(os.urandom(16).hex())
        cookie.chmod(0o400)

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "HOME": str(self.folder),  # the cookie: only this folder's owner may talk to it
            "RABBITMQ_CONF_ENV_FILE": str(self.folder / "rabbitmq-env.conf"),
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_CONFIG_FILE": str(self.folder / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.folder / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(self.folder / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.folder / "log"),
            "RABBITMQ_PID_FILE": str(self.folder / "rabbitmq.pid"),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
        }

    def start(self) -> RabbitMQServer:
        log = (self.folder / "server.log").open("ab")
        self.process = subprocess.Popen(
            [str(self.bin / "rabbitmq-server")],
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            _wait(lambda: self._up(), 90, f"rabbitmq-server (log: {self.folder / 'server.log'})")
        except ServiceUnavailable:
            self.kill()
            raise
        return self

    def _up(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise ServiceUnavailable(
                f"rabbitmq-server exited ({self.process.returncode}); its log: "
                + (self.folder / "server.log").read_text(errors="replace")[-2000:]
            )
        return port_open("127.0.0.1", self.port)

    def ctl(self, *args: str) -> None:
        """rabbitmqctl against this node."""
        subprocess.run(
            [str(self.bin / "rabbitmqctl"), "-n", self.node, *args],
            env=self.env(),
            check=True,
            capture_output=True,
            timeout=60,
        )

    def kill(self) -> None:
        """SIGKILL of the whole node (the Erlang VM and its helpers): a crash. Durable
        queues and the persistent messages in them are back after `start`."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        self._wait_closed()

    def _wait_closed(self) -> None:
        # The script exits before the Erlang VM it started has let go of the port.
        _wait(lambda: not port_open("127.0.0.1", self.port), 30, "rabbitmq-server to exit")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
            self._wait_closed()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def copy_logs(self, to: Path) -> None:
        """The node's own logs (its console and its log folder), for a failed run."""
        to.mkdir(parents=True, exist_ok=True)
        shutil.copy(self.folder / "server.log", to / "server.log")
        shutil.copytree(self.folder / "log", to / "log", dirs_exist_ok=True)


def amqp_reachable(url: str) -> bool:
    """An AMQP broker answers at `url` and lets its user in."""
    from kombu import Connection  # type: ignore[attr-defined]

    parts = urlsplit(url)
    if not port_open(parts.hostname or "127.0.0.1", parts.port or 5672):
        return False
    try:
        with Connection(url, connect_timeout=3) as conn:
            conn.ensure_connection(max_retries=1)
        return True
    except Exception:
        return False


class VirtualHosts:
    """Makes and removes RabbitMQ vhosts on the broker at `url` (whose user gets every
    permission there): through `ctl` (a private node's rabbitmqctl), else the machine's
    rabbitmqctl when the broker is on this machine, else the management API on :15672.
    `add` returns "" when none of them may make one."""

    def __init__(self, url: str, ctl: Callable[..., None] | None = None) -> None:
        self.url = urlsplit(url)
        self.user = unquote(self.url.username or "guest")
        self.ctl = ctl or self._system_ctl()

    def _system_ctl(self) -> Callable[..., None] | None:
        binary = shutil.which("rabbitmqctl") or shutil.which("rabbitmqctl", path="/usr/sbin")
        if binary is None or self.url.hostname not in ("127.0.0.1", "localhost", "::1"):
            return None

        def ctl(*args: str) -> None:
            subprocess.run([binary, *args], check=True, capture_output=True, timeout=60)

        return ctl

    def _api(self, method: str, path: str, body: dict[str, str] | None = None) -> None:
        import httpx

        response = httpx.request(
            method,
            f"http://{self.url.hostname}:15672/api/{path}",
            auth=(self.user, unquote(self.url.password or "guest")),
            json=body,
            timeout=10,
        )
        response.raise_for_status()

    def add(self, name: str) -> str:
        try:
            if self.ctl is not None:
                self.ctl("add_vhost", name)
                self.ctl("set_permissions", "-p", name, self.user, ".*", ".*", ".*")
            else:
                self._api("PUT", f"vhosts/{name}")
                self._api(
                    "PUT",
                    f"permissions/{name}/{quote(self.user, safe='')}",
                    {"configure": ".*", "write": ".*", "read": ".*"},
                )
            return name
        except Exception:
            return ""

    def delete(self, name: str) -> None:
        try:
            if self.ctl is not None:
                self.ctl("delete_vhost", name)
            else:
                self._api("DELETE", f"vhosts/{name}")
        except Exception:
            pass


def declare_queues(url: str) -> None:
    """Declare memoryd's queues on the RabbitMQ at `url` as its workers do (quorum)."""
    from kombu import Connection  # type: ignore[attr-defined]

    from memoryd.worker.config import task_queues

    with Connection(url) as conn:
        for queue in task_queues(quorum=True):
            queue(conn.default_channel).declare()


def purge_queues(url: str) -> None:
    """Empty memoryd's queues on the broker at `url` (one channel each: RabbitMQ closes a
    channel that names a missing queue). Not deleted: a process's producers remember
    what they declared on a connection (kombu's pools are per process) and would not
    declare a deleted queue again, so what they sent would be dropped as unroutable."""
    from kombu import Connection  # type: ignore[attr-defined]

    from memoryd.worker.config import QUEUES

    with Connection(url) as conn:
        for name in QUEUES:
            channel = conn.channel()
            try:
                channel.queue_purge(name)
            except conn.channel_errors:
                pass
            finally:
                channel.close()
