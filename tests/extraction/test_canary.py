"""No chat text outside the memory tables: a turn's words pushed through an LLM failure,
a database error and a dead letter appear in no stored error, log line, task error,
batch listing or metric."""

from __future__ import annotations

import json
import logging
import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text, update
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.extraction.batch import extract_session
from memoryd.models.db import session_scope
from memoryd.models.tables import ChatSession, ExtractionBatch, Turn
from memoryd.server.app import create_app
from memoryd.settings import Settings
from testkit import fakellm
from testkit.fakellm import FakeLLM
from tests.conftest import with_llm
from tests.extraction.test_failures import KEY, say
from tests.server.conftest import bearer, make_key, sign_in

REFUSE = {
    "postgres": [
        "CREATE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "RAISE EXCEPTION 'disk full'; END $$",
        "CREATE TRIGGER test_refuse BEFORE INSERT ON memories "
        "FOR EACH ROW EXECUTE FUNCTION test_refuse()",
    ],
    "sqlite": [
        "CREATE TRIGGER test_refuse BEFORE INSERT ON memories "
        "BEGIN SELECT RAISE(ABORT, 'disk full'); END",
    ],
}
ALLOW = {
    "postgres": ["DROP TRIGGER test_refuse ON memories", "DROP FUNCTION test_refuse()"],
    "sqlite": ["DROP TRIGGER test_refuse"],
}


def stop_backing_off(settings: Settings) -> None:
    with session_scope(settings.storage) as session:
        session.execute(update(ChatSession).values(retry_at=None))


def run_sql(settings: Settings, statements: list[str]) -> None:
    with session_scope(settings.storage) as session:
        for statement in statements:
            session.execute(text(statement))


def test_a_turns_words_reach_no_error_log_or_listing(
    backend: str,
    settings: Settings,
    db: Session,
    fake_llm: FakeLLM,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memoryd.tasks import extraction as task_module

    caplog.set_level(logging.INFO)
    canary = f"canary{uuid.uuid4().hex}"
    s = with_llm(settings, fake_llm, llm_retries=0, max_attempts=2)
    monkeypatch.setattr(task_module, "get_settings", lambda: s)
    say(s, f"Please call me {canary}, it is my name")

    fake_llm.push(fakellm.server_error(500))  # an LLM failure: transient, backs off
    assert extract_session(s, KEY).failed_batches == 1
    stop_backing_off(s)
    # A server that quotes the request in its error (as pydantic-based ones do).
    echo = {"error": {"message": f"input_value='{canary}'", "type": "invalid_request_error"}}
    fake_llm.push(fakellm.Action(status=400, body=echo))
    assert extract_session(s, KEY).failed_batches == 1
    stop_backing_off(s)

    fact = {"content": f"Is called {canary}", "confidence": 0.95}
    fake_llm.push(fakellm.Action(content=json.dumps({"facts": [fact]})))
    run_sql(s, REFUSE[backend])  # the database refuses the memory: a bug, dead-lettered
    try:
        failed = task_module.extract_session.apply(args=KEY.as_args())
    finally:
        run_sql(s, ALLOW[backend])
    assert failed.state == "FAILURE"  # what Flower shows of it: error and traceback
    assert canary not in str(failed.result) and canary not in str(failed.traceback)
    assert db.scalars(select(Turn.status)).all() == ["failed"]
    errors = db.scalars(select(ExtractionBatch.error)).all()
    db.commit()
    assert len(errors) == 3 and all(e and canary not in e for e in errors)
    assert "400 (invalid_request_error)" in errors[1]
    assert "disk full" in errors[-1]  # still says what went wrong

    admin = make_key(s, "ops", admin=True)
    app = create_app(s, client=MemoryClient(s, dispatch=False))
    with TestClient(app, base_url="https://testserver") as http:
        listing = http.get("/v1/batches", headers=bearer(admin)).text
        metrics = http.get("/metrics").text
        sign_in(http, admin)
        home = http.get("/").text
        batches, _, dead_letters = http.get("/batches").text.partition('<table class="dead">')
    assert canary not in listing and canary not in metrics
    assert canary not in home and canary not in batches  # the page, outside the turn views
    assert canary in dead_letters  # the dead-lettered turn itself, shown to be retried
    assert canary not in caplog.text
