"""docker-compose.yml keeps the operational promises README makes about it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

COMPOSE = Path(__file__).resolve().parent.parent / "docker-compose.yml"


def services() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return dict(loaded["services"])


def test_healthchecks_wait_on_tcp() -> None:
    """During initdb PostgreSQL answers on its socket before TCP: a socket check would
    let `migrate` start too early."""
    for name in ("postgres", "redis"):
        test = services()[name]["healthcheck"]["test"]
        assert "-h" in test and "127.0.0.1" in test, name


def test_migrate_waits_and_retries_and_workers_wait_for_it() -> None:
    migrate = services()["migrate"]
    assert migrate["restart"].startswith("on-failure")
    env = yaml.safe_load(COMPOSE.read_text())["x-memoryd-env"]
    assert float(env["MEMORYD_STARTUP_WAIT_SECONDS"]) > 0
    for name in ("worker", "beat"):
        condition = services()[name]["depends_on"]["migrate"]["condition"]
        assert condition == "service_completed_successfully"


def test_flower_is_behind_basic_auth() -> None:
    command = " ".join(services()["flower"]["command"])
    assert "--basic-auth=" in command and "FLOWER_PASSWORD:?" in command


def test_unset_llm_variables_reach_memoryd_as_empty_which_means_unset() -> None:
    env = yaml.safe_load(COMPOSE.read_text())["x-memoryd-env"]
    assert env["OPENAI_BASE_URL"] == "${OPENAI_BASE_URL:-}"  # see test_an_empty_variable...


def test_the_server_waits_for_migrate_and_is_checked_over_tcp() -> None:
    server = services()["server"]
    assert server["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    check = " ".join(server["healthcheck"]["test"])
    assert "http://127.0.0.1:8080/v1/health" in check
    assert "--host" in server["command"] and "0.0.0.0" in server["command"]


def test_postgres_is_given_memory_for_the_memories() -> None:
    """README's sizing: the default 128 MB of shared_buffers holds a small fraction of a
    million memories, and recall then reads most of a scope from disk."""
    command = services()["postgres"]["command"]
    settings = dict(arg.split("=", 1) for arg in command if "=" in arg)
    assert settings["shared_buffers"].endswith(":-2GB}")
    assert "effective_cache_size" in settings


def test_every_queue_has_a_worker_and_extraction_one_of_its_own() -> None:
    """Housekeeping and the embedding model never hold an extraction slot."""
    from memoryd.worker.config import QUEUES

    consumed: dict[str, set[str]] = {}
    for name, service in services().items():
        command = service.get("command") or []
        if command[:2] == ["memoryd", "worker"]:
            queues = command[command.index("--queues") + 1]
            consumed[name] = set(queues.split(","))
    assert consumed["worker"] == {"extraction"}
    assert set().union(*consumed.values()) == set(QUEUES)
