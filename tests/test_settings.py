"""Settings: environment names, the OpenAI variables, and clear errors for bad values."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from memoryd.env_names import OTHER_VARIABLES, setting_variables
from memoryd.models.db import describe_db_error
from memoryd.settings import FIELDS as SETTING_FIELDS
from memoryd.settings import PART_OF, PARTS, Settings, explain, get_settings, masked_url


def test_openai_variables_configure_the_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    settings = Settings()
    assert (settings.llm.llm_api_key, settings.llm.llm_base_url) == (
        "sk-test",
        "http://127.0.0.1:9/v1",
    )
    assert settings.llm.llm_configured
    monkeypatch.setenv("MEMORYD_OFFLINE_EXTRACTOR", "true")
    assert not Settings().llm.llm_configured


def test_a_setting_given_in_code_wins_over_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The LLM's settings have aliases: the code's value must still win over any of them.
    monkeypatch.setenv("OPENAI_BASE_URL", "http://elsewhere/v1")
    monkeypatch.setenv("MEMORYD_LLM_API_KEY", "sk-environment")
    monkeypatch.setenv("MEMORYD_BATCH_SIZE", "9")
    given = Settings(llm_base_url="http://fake/v1", llm_api_key="sk-code", batch_size=3)
    assert (given.llm.llm_base_url, given.llm.llm_api_key) == ("http://fake/v1", "sk-code")
    assert given.extraction.batch_size == 3
    assert Settings(OPENAI_API_KEY="sk-alias").llm.llm_api_key == "sk-alias"
    assert Settings().llm.llm_base_url == "http://elsewhere/v1"


def test_memoryd_variables_win_and_field_names_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("MEMORYD_LLM_API_KEY", "sk-memoryd")
    monkeypatch.setenv("MEMORYD_BATCH_SIZE", "8")
    assert Settings().llm.llm_api_key == "sk-memoryd"
    assert Settings().extraction.batch_size == 8
    assert Settings(llm_base_url="http://x/v1").llm.llm_base_url == "http://x/v1"


def test_injection_rules_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORYD_INJECT_LONG_TERM_TRIGGERS", '["deploy", "部署"]')
    monkeypatch.setenv("MEMORYD_INJECT_FIRST_ROUND_EMPTY", "true")
    monkeypatch.setenv("MEMORYD_INJECT_MIN_QUERY_LENGTH", "4")
    settings = Settings()
    assert settings.agent.inject_long_term_triggers == ("deploy", "部署")
    assert (settings.agent.inject_first_round_empty, settings.agent.inject_min_query_length) == (
        True,
        4,
    )


def test_embedded_defaults() -> None:
    settings = Settings(data_dir="/tmp/memoryd-x")
    assert settings.storage.resolved_database_url == "sqlite:////tmp/memoryd-x/memoryd.db"
    assert settings.storage.broker_url == "filesystem://"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MEMORYD_BATCH_SIZE": "0"}, "batch_size"),
        ({"MEMORYD_MIN_CONFIDENCE": "1.5"}, "min_confidence"),
        ({"MEMORYD_LLM_RESPONSE_FORMAT": "xml"}, "llm_response_format"),
        ({"MEMORYD_EMBEDDING_PROVIDER": "cohere"}, "embedding_provider"),
        ({"MEMORYD_EMBEDDING_BASE_URL": "localhost:11434"}, "embedding_base_url"),
        ({"OPENAI_BASE_URL": "api.openai.com/v1"}, "http:// or https://"),
        (
            {"MEMORYD_MIN_CONFIDENCE": "0.9", "MEMORYD_LONG_TERM_CONFIDENCE": "0.5"},
            "MEMORYD_LONG_TERM_CONFIDENCE must be >=",
        ),
        ({"MEMORYD_INJECT_LONG_TERM_TRIGGERS": '["deploy", " "]'}, "keyword is blank"),
        ({"MEMORYD_INJECT_MIN_QUERY_LENGTH": "-1"}, "inject_min_query_length"),
    ],
)
def test_bad_settings_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], message: str
) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ValidationError, match=message):
        Settings()


def test_an_empty_variable_means_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """docker-compose passes `OPENAI_BASE_URL=` when the host has none: that must mean
    OpenAI's endpoint, not a base URL of ''."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "")
    monkeypatch.setenv("MEMORYD_DATABASE_URL", "")
    monkeypatch.setenv("MEMORYD_EXTRACTION_MODEL", "")
    settings = Settings()
    assert settings.llm.llm_base_url is None
    assert settings.storage.resolved_database_url.startswith("sqlite:///")
    assert settings.llm.extraction_model == "gpt-4o-mini"


@pytest.mark.parametrize(
    ("env", "line"),
    [
        ({"MEMORYD_DATABASE_URL": "nonsense"}, "MEMORYD_DATABASE_URL: not a database URL"),
        ({"MEMORYD_DATABASE_URL": "mysql://h/db"}, "MEMORYD_DATABASE_URL: 'mysql' is not"),
        ({"MEMORYD_BROKER_URL": "localhost:6379"}, "MEMORYD_BROKER_URL: not a broker URL"),
        ({"MEMORYD_LEASE_SECONDS": "-1"}, "MEMORYD_LEASE_SECONDS: Input should be greater"),
        ({"MEMORYD_INJECT_TIERS": '["long", 3]'}, "MEMORYD_INJECT_TIERS.1: Input should be"),
        ({"MEMORYD_EMBEDDING_ONNX_DIR": "models"}, "MEMORYD_EMBEDDING_ONNX_DIR: 'models' is not"),
    ],
)
def test_a_settings_mistake_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], line: str
) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ValidationError) as caught:
        Settings()
    lines = explain(caught.value)
    assert len(lines) == 1 and lines[0].startswith(line)


def test_embeddings_turn_on_with_a_model_and_an_endpoint() -> None:
    assert not Settings().embeddings_on
    assert not Settings(embedding_model="nomic-embed-text").embeddings_on  # no endpoint
    assert Settings(
        embedding_model="nomic-embed-text", embedding_base_url="http://localhost:11434/v1"
    ).embeddings_on
    assert Settings(embedding_provider="local", embedding_model="/models/minilm").embeddings_on


@pytest.mark.parametrize(
    "name, url",
    [
        ("database_url", "postgres ql://ann:s3cret@db/memoryd"),
        ("broker_url", "kafka://ann:s3cret@mq"),
    ],
)
def test_a_bad_url_is_named_with_its_password_masked(name: str, url: str) -> None:
    with pytest.raises(ValidationError) as raised:
        Settings(**{name: url})
    (line,) = explain(raised.value)
    assert line.startswith(f"MEMORYD_{name.upper()}: not a") and "s3cret" not in line


@pytest.mark.parametrize(
    "url, shown",
    [
        ("postgresql+psycopg://ann@db/m?password=s3cret&sslmode=require", "password=***&sslmode"),
        ("postgresql://ann:s3 cr@et@db/m", "ann:***@db/m"),
        ("redis://:s3cret@mq:6379/0;redis://:s3cret@mq2:6379/0", ":***@mq2:6379/0"),
        ("postgresql://db/m?sslmode=verify-full&sslpassword=s3cret", "sslpassword=***"),
        ("https://llm.example/v1?api_key=s3cret&model=x", "api_key=***&model=x"),
        ("https://llm.example/v1?access_token=s3cret", "access_token=***"),
        ("amqp://mq/vhost?auth_token=s3cret", "auth_token=***"),
        ("https://llm.example/v1?key=s3cret&alt=json", "key=***&alt=json"),
    ],
)
def test_a_password_is_masked_wherever_the_url_holds_it(url: str, shown: str) -> None:
    assert shown in masked_url(url) and "s3cret" not in masked_url(url)
    if url.startswith("postgresql"):  # as `memoryd migrate` and the CLI say it
        said = describe_db_error(RuntimeError("refused"), Settings(database_url=url).storage)
        assert "s3cret" not in said


def test_an_unknown_memoryd_variable_is_named_once_with_the_closest_one(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A misspelt variable is ignored by Settings: its setting keeps the default, so the
    process says so, once, however often the settings are read again."""
    monkeypatch.setenv("MEMORYD_BATCH_SIZ", "8")
    monkeypatch.setenv("MEMORYD_NO_SUCH_KNOB_AT_ALL", "1")
    for name in OTHER_VARIABLES:  # read by the tests, benches, compose, the Node example
        monkeypatch.setenv(name, os.environ.get(name, "x"))
    get_settings.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="memoryd.env_names"):
            assert get_settings().extraction.batch_size == 20
            get_settings.cache_clear()
            get_settings()
    finally:
        get_settings.cache_clear()
    notices = [r.getMessage() for r in caplog.records if r.name == "memoryd.env_names"]
    assert notices == [
        "MEMORYD_BATCH_SIZ is not a memoryd setting; did you mean MEMORYD_BATCH_SIZE?",
        "MEMORYD_NO_SUCH_KNOB_AT_ALL is not a memoryd setting, so it is ignored",
    ]


def test_every_memoryd_variable_the_project_reads_is_known() -> None:
    """What the repository reads from the environment outside Settings is in
    OTHER_VARIABLES, so nobody is told their own variable is a misspelling."""
    root = Path(__file__).resolve().parent.parent
    files = [*root.glob("*.yml"), *root.glob("Makefile"), *root.glob("Dockerfile")]
    for folder in ("memoryd", "tests", "bench", "examples"):
        files += [p for p in (root / folder).rglob("*") if p.suffix in (".py", ".mjs", ".sh")]
    read = re.compile(
        r"""(?:environ\.get\(|getenv\(|environ\[|process\.env\.|\$\{)["']?(MEMORYD_\w+)"""
    )
    names = {name for path in files for name in read.findall(path.read_text(errors="replace"))}
    assert names >= {"MEMORYD_TEST_PG", "MEMORYD_BENCH_PG", "MEMORYD_PG_MAX_CONNECTIONS"}
    assert names - set(setting_variables(SETTING_FIELDS)) == set(OTHER_VARIABLES)


def test_settings_are_held_by_stage_under_their_variable_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert len(Settings.model_fields) < 30  # one field per stage, not one per setting
    held = [name for _, _, part in PARTS for name in part.model_fields]
    assert len(held) == len(set(held)) == len(SETTING_FIELDS)  # a name in one part only
    # Every whole-number variable, set to a value other than its default, reaches its part.
    numbers = [
        (name, field)
        for name, field in SETTING_FIELDS.items()
        if type(field.default) is int and name not in NO_SIMPLE_CHANGE
    ]
    assert len({PART_OF[name] for name, _ in numbers}) >= 8
    for name, field in numbers:
        monkeypatch.setenv(f"MEMORYD_{name.upper()}", str(field.default + 1))
        settings = Settings()
        assert getattr(getattr(settings, PART_OF[name]), name) == field.default + 1, name
        monkeypatch.delenv(f"MEMORYD_{name.upper()}")
    assert Settings() == Settings.model_construct()


# Integer settings whose default + 1 breaks a rule between settings.
NO_SIMPLE_CHANGE = {"extract_memory_tokens"}


def test_a_setting_is_given_and_changed_by_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORYD_FUSION_RRF_K", "3")
    settings = Settings(batch_size=8, recall={"rerank_top_n": 5})
    assert (settings.extraction.batch_size, settings.recall.rerank_top_n) == (8, 5)
    assert settings.recall.fusion_rrf_k == 3  # the environment fills what was not given
    changed = settings.updated(prefetch_limit=40, fusion_rrf_k=4)
    assert (changed.extraction.prefetch_limit, changed.recall.fusion_rrf_k) == (40, 4)
    assert (changed.extraction.batch_size, settings.extraction.prefetch_limit) == (8, 20)
    assert changed.value("prefetch_limit") == 40
    assert hash(changed) != hash(settings) and changed == settings.updated(
        prefetch_limit=40, fusion_rrf_k=4
    )
    with pytest.raises(ValidationError) as raised:
        Settings(recall={"rerank_top_m": 5})  # a part takes only its own names
    assert "rerank_top_m" in str(raised.value)


def test_a_mistake_between_settings_of_one_stage_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMORYD_MIN_CONFIDENCE", "0.9")
    monkeypatch.setenv("MEMORYD_LONG_TERM_CONFIDENCE", "0.8")
    with pytest.raises(ValidationError) as raised:
        Settings()
    assert explain(raised.value) == [
        "MEMORYD_LONG_TERM_CONFIDENCE must be >= MEMORYD_MIN_CONFIDENCE (got 0.8 < 0.9)"
    ]


def test_a_client_built_from_a_bad_environment_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """MemoryClient() reads MEMORYD_*: a bad value is raised as the variable a person set,
    not as the settings' inner field ("extraction.batch_size")."""
    from memoryd import MemoryClient
    from memoryd.errors import InvalidSettings

    monkeypatch.setenv("MEMORYD_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("MEMORYD_BATCH_SIZE", "abc")
    monkeypatch.setenv("MEMORYD_MIN_CONFIDENCE", "2")
    get_settings.cache_clear()
    try:
        with pytest.raises(InvalidSettings) as raised:
            MemoryClient()
    finally:
        get_settings.cache_clear()
    assert isinstance(raised.value, ValueError)
    assert [line.split(":")[0] for line in raised.value.lines] == [
        "MEMORYD_BATCH_SIZE",
        "MEMORYD_MIN_CONFIDENCE",
    ]
    assert str(raised.value).startswith("invalid settings: MEMORYD_BATCH_SIZE: ")


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        # Each crashed every task that used it, the clock skew's losing the good turns
        # of the call too: refused at the start instead.
        ("MEMORYD_MAX_CLOCK_SKEW_SECONDS", "inf", "finite number"),
        ("MEMORYD_LEASE_SECONDS", "1e12", "at most 3,153,600,000 (a hundred years)"),
        ("MEMORYD_FLUSH_IDLE_SECONDS", "99999999999999", "(a hundred years)"),
        ("MEMORYD_TURN_RETENTION_DAYS", "1e12", "at most 36,500 (a hundred years)"),
        ("MEMORYD_BATCH_SIZE", "99999999999999999999", "at most 2,147,483,647"),
        ("MEMORYD_RERANK_TIMEOUT", "nan", "finite number"),
    ],
)
def test_numbers_past_what_they_can_mean_are_refused_at_the_start(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, said: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError) as raised:
        Settings()
    [line] = explain(raised.value)
    assert line.startswith(f"{variable}: ") and said in line, line


@pytest.mark.parametrize("value", ["user", "[bad"])
def test_a_list_setting_given_other_text_says_to_give_json(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("MEMORYD_MEMORY_CATEGORIES", value)
    with pytest.raises(ValidationError) as raised:
        Settings()
    assert explain(raised.value) == [
        'MEMORYD_MEMORY_CATEGORIES: give a JSON array of its values, e.g. ["first", "second"]'
    ]
