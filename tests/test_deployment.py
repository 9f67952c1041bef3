"""docker-compose.yml keeps the operational promises README makes about it."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from memoryd.env_example import env_example
from memoryd.settings import FIELDS as SETTING_FIELDS
from memoryd.settings import Settings

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


def _memoryd_services() -> dict[str, Any]:
    return {
        name: service
        for name, service in services().items()
        if isinstance(service.get("environment"), dict)
        and "MEMORYD_DATABASE_URL" in service["environment"]
    }


def test_ports_are_published_on_loopback_only_and_no_secret_has_a_default() -> None:
    for name, service in services().items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)
    password = services()["postgres"]["environment"]["POSTGRES_PASSWORD"]
    assert password == "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
    url = yaml.safe_load(COMPOSE.read_text())["x-memoryd-env"]["MEMORYD_DATABASE_URL"]
    assert "${POSTGRES_PASSWORD:?" in url and "memoryd:memoryd@" not in url
    redis = services()["redis"]
    assert "${REDIS_PASSWORD:?set REDIS_PASSWORD}" in redis["command"]  # --requirepass
    assert redis["environment"]["REDISCLI_AUTH"] == "${REDIS_PASSWORD:?set REDIS_PASSWORD}"


def test_every_memoryd_service_reads_the_env_file_that_lists_every_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, service in _memoryd_services().items():
        assert service["env_file"] == [{"path": "./memoryd.env", "required": False}], name
    example = COMPOSE.with_name("memoryd.env.example").read_text()
    assert example == env_example(), "run `python -m memoryd.env_example` and commit the file"
    listed = dict(re.findall(r"^# (MEMORYD_\w+)=(.*)$", example, re.M))
    assert set(listed) == {f"MEMORYD_{name.upper()}" for name in SETTING_FIELDS}
    # Uncommented as it stands, the file changes nothing: every value is the default.
    for variable in [v for v in os.environ if v.startswith("MEMORYD_")]:
        monkeypatch.delenv(variable)
    for variable, value in listed.items():
        monkeypatch.setenv(variable, value)
    assert Settings().model_dump() == Settings.model_construct().model_dump()


def test_the_connection_budget_fits_postgres() -> None:
    """Each process: two engines (transactions, ingest's single statements) of pool plus
    overflow; a worker needs one connection per task and one per lease heartbeat."""
    command = services()["postgres"]["command"]
    limit = dict(arg.split("=", 1) for arg in command if "=" in arg)["max_connections"]
    max_connections = int(re.fullmatch(r"\$\{\w+:-(\d+)\}", limit).group(1))  # type: ignore[union-attr]
    total = 0
    for name, service in _memoryd_services().items():
        if name == "migrate":
            continue  # done before the others start
        env, command = service["environment"], service["command"]
        pool, overflow = int(env["MEMORYD_DB_POOL_SIZE"]), int(env["MEMORYD_DB_MAX_OVERFLOW"])
        processes = int(command[command.index("--workers") + 1]) if "--workers" in command else 1
        if "--concurrency" in command:
            concurrency = int(command[command.index("--concurrency") + 1])
            assert pool >= concurrency and overflow >= concurrency, name
        total += processes * 2 * (pool + overflow)
    assert total <= max_connections - 3  # superuser_reserved_connections


def test_the_rabbitmq_profile_runs_memoryd_on_rabbitmq_and_the_default_stays_on_redis() -> None:
    """README's "Which broker": `--profile rabbitmq` with MEMORYD_BROKER_URL=amqp://...
    starts a healthchecked RabbitMQ with a volume for its quorum queues, and every
    memoryd service that uses the broker waits for it; without the profile, Redis."""
    rabbitmq = services()["rabbitmq"]
    assert rabbitmq["profiles"] == ["rabbitmq"]
    assert "rabbitmq-diagnostics" in rabbitmq["healthcheck"]["test"]
    assert any(v.endswith(":/var/lib/rabbitmq") for v in rabbitmq["volumes"])
    assert rabbitmq["environment"]["RABBITMQ_DEFAULT_PASS"] == "${RABBITMQ_PASSWORD:-}"
    assert "RABBITMQ_DEFAULT_PASS" in " ".join(rabbitmq["entrypoint"])  # none: no start
    assert all(not p.startswith(("5672", "0.0.0.0")) for p in rabbitmq.get("ports", []))
    env = yaml.safe_load(COMPOSE.read_text())["x-memoryd-env"]
    redis = "redis://:${REDIS_PASSWORD:?set REDIS_PASSWORD}@redis:6379/0"
    assert env["MEMORYD_BROKER_URL"] == "${MEMORYD_BROKER_URL:-" + redis + "}"
    for name, service in services().items():
        waits = service.get("depends_on", {})
        if "redis" in waits:
            assert waits["rabbitmq"] == {"condition": "service_healthy", "required": False}, name
