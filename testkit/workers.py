"""Real worker and beat processes (`memoryd worker|beat`) for end-to-end tests and benches."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import func, select

from memoryd.models.batch_totals import batch_figures
from memoryd.models.db import session_scope
from memoryd.models.tables import Turn, TurnStatus
from memoryd.settings import FIELDS, Settings
from memoryd.worker.app import make_celery
from memoryd.worker.config import QUEUES
from testkit.hosts import Host

REPO_ROOT = Path(__file__).resolve().parent.parent


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment that makes a child process build exactly these settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORYD_", "OPENAI_"))}
    for name in FIELDS:
        value = settings.value(name)
        if value is None:
            continue
        if name == "data_dir":
            value = Path(value).resolve()
        # A list setting is read from the environment as JSON.
        shown = json.dumps(list(value)) if isinstance(value, tuple) else str(value)
        env[f"MEMORYD_{name.upper()}"] = shown
    env["MEMORYD_DATABASE_URL"] = settings.storage.resolved_database_url
    env["PYTHONPATH"] = str(REPO_ROOT)
    return env


@dataclass
class Proc:
    process: subprocess.Popen[bytes]
    log_path: Path

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Kill the whole process group (the worker and any children)."""
        if self.alive():
            os.killpg(self.process.pid, sig)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if not self.alive():
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def _spawn(args: list[str], settings: Settings, log_path: Path, host: Host | None = None) -> Proc:
    """A worker or beat process, on this machine or in `host` (testkit/hosts.py)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    handle = log_path.open("ab")
    argv = [sys.executable, "-m", "memoryd", *args]  # `memoryd worker|beat`
    env = settings_env(settings)
    process = subprocess.Popen(
        host.command(argv) if host else argv,
        env=host.environment(env) if host else env,
        stdout=handle,
        stderr=subprocess.STDOUT,
        cwd=REPO_ROOT,
        start_new_session=True,
    )
    return Proc(process, log_path)


def start_worker(
    settings: Settings,
    tmp_path: Path,
    name: str = "w1",
    concurrency: int = 4,
    queues: str = ",".join(QUEUES),
    host: Host | None = None,
    without: tuple[str, ...] = ("gossip", "mingle", "heartbeat"),
) -> Proc:
    return _spawn(
        [
            "worker",
            "--pool=threads",
            f"--concurrency={concurrency}",
            f"--queues={queues}",
            f"--hostname={name}@%h",
            "--loglevel=INFO",
            *(f"--without-{part}" for part in without),
        ],
        settings,
        tmp_path / f"{name}.log",
        host,
    )


def start_beat(settings: Settings, tmp_path: Path, host: Host | None = None) -> Proc:
    return _spawn(
        ["beat", "--loglevel=INFO", f"--schedule={tmp_path / 'beat-schedule'}", "--max-interval=1"],
        settings,
        tmp_path / "beat.log",
        host,
    )


def wait_until(
    predicate: Callable[[], bool],
    timeout: float = 60.0,
    interval: float = 0.2,
    what: str = "condition",
    procs: tuple[Proc, ...] = (),
    state: Callable[[], str] | None = None,
) -> None:
    """Wait for `predicate`; on timeout, fail with the processes' logs and `state()`,
    what the pipeline held then (see pipeline_state)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    logs = "\n".join(f"--- {p.log_path.name}\n{p.log()[-3000:]}" for p in procs)
    held = f"\n--- state\n{state()}" if state else ""
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{logs}{held}")


def pipeline_state(settings: Settings) -> str:
    """Turns by user and status, batches by status and the messages each queue holds:
    whether work stalled in the database or never reached (or left) the broker."""
    with session_scope(settings.storage, readonly=True) as session:
        turns = session.execute(
            select(Turn.user_id, Turn.status, func.count()).group_by(Turn.user_id, Turn.status)
        ).all()
        batches = batch_figures(session, rejections=False).kinds
    lines = [f"turns {user} {status}: {n}" for user, status, n in sorted(turns)]
    lines += [f"batches {kind}: {dict(f.by_status)}" for kind, f in sorted(batches.items())]
    with make_celery(settings).connection_for_write() as conn:
        for name in QUEUES:
            try:  # a channel each: a queue the broker does not know closes its channel
                with conn.channel() as channel:
                    count = channel.queue_declare(name, passive=True).message_count
                lines.append(f"queue {name}: {count} messages")
            except Exception as error:  # a diagnosis: never hide the timeout itself
                lines.append(f"queue {name}: unreadable ({error!r})")
    return "\n".join(lines)


def turns_left(settings: Settings) -> int:
    """Turns not yet done or dead-lettered."""
    with session_scope(settings.storage) as session:
        return int(
            session.scalar(
                select(func.count()).where(
                    Turn.status.in_([TurnStatus.PENDING, TurnStatus.CLAIMED])
                )
            )
            or 0
        )
