"""Throwaway PostgreSQL and Redis servers on spare ports, in a folder of their own.

The test suite starts them when the machine's own servers are not running; the chaos
bench always does, because it kills and restarts them. Each is a real server binary
(Debian's postgresql and redis-server packages); nothing is mocked.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

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

    def __init__(self, folder: Path, port: int | None = None) -> None:
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
                "127.0.0.1",
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

    def __init__(self, port: int | None = None) -> None:
        self.bin = _pg_bin()
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
            f"-p {self.port} -h 127.0.0.1 -k {self.folder} -c fsync=off -c max_connections=300",
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
    the transactions of many clients take turns on each of them, as in production."""

    def __init__(self, upstream: tuple[str, int], server_connections: int = 3) -> None:
        binary = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin")
        if binary is None:
            raise ServiceUnavailable(
                "pgbouncer is not installed: run `apt-get install pgbouncer` (the tests of "
                "memoryd behind a transaction pooler start one of their own)"
            )
        self.binary = binary
        self.upstream = upstream
        self.server_connections = server_connections
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
        config.write_text(
            "[databases]\n"
            f"* = host={host} port={port}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.folder / 'users.txt'}\n"
            "pool_mode = transaction\n"
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

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=20)
        shutil.rmtree(self.folder, ignore_errors=True)
