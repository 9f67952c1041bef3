"""The HTTP API on both databases: what a Node or Go backend sees, bad input included."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.errors import TurnRejected
from memoryd.models.db import session_scope
from memoryd.models.tables import Memory, Turn, TurnStatus
from memoryd.server.app import create_app
from memoryd.settings import Settings
from tests.factories import add_turns, count_turns, make_memory, turn_item
from tests.server.conftest import Keys, bearer, sign_in

PROBLEM = "application/problem+json"


def assert_problem(response: Any, status: int, field: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    assert body["status"] == status and body["type"].startswith("/problems/") and body["detail"]
    if field is not None:
        assert field in [e["field"] for e in body["errors"]], body
    return body


def test_turns_are_stored_per_item_and_the_result_names_each_rejected_one(
    api: TestClient, keys: Keys, db: Session
) -> None:
    body = {"turns": [turn_item(0), turn_item(1, content="  "), turn_item(2, turn_key="k2")]}
    response = api.post("/v1/turns", json=body, headers=bearer(keys.bot))
    assert response.status_code == 202, response.text
    result = response.json()
    assert (result["accepted"], result["duplicates"]) == (2, 0)
    assert result["rejected"] == [
        {"index": 1, "errors": [{"field": "content", "message": "content is blank"}]}
    ]
    again = api.post("/v1/turns", json=turn_item(3, turn_key="k2"), headers=bearer(keys.bot))
    assert again.status_code == 202 and again.json()["duplicates"] == 1
    assert count_turns(db) == 2


def test_the_routes_threads_end_with_the_server(api_settings: Settings, keys: Keys) -> None:
    """POST /v1/turns stores in the server's own threads: shutting down waits for them
    before the client closes, and leaves none behind."""

    def route_threads() -> set[threading.Thread]:  # another server of this process's too
        return {t for t in threading.enumerate() if t.name.startswith("memoryd-route")}

    before = route_threads()
    app = create_app(api_settings, client=MemoryClient(api_settings, dispatch=False))
    with TestClient(app, base_url="https://testserver") as http:
        response = http.post("/v1/turns", json=turn_item(0), headers=bearer(keys.bot))
        assert response.status_code == 202 and response.json()["accepted"] == 1
        assert route_threads() - before
    assert not route_threads() - before


def test_one_id_rule_at_every_entrance(api: TestClient, keys: Keys, api_settings: Settings) -> None:
    """An id no path route could name is refused wherever it comes in, naming its field;
    surrounding whitespace is stripped in paths as in bodies."""
    auth = bearer(keys.bot)
    for bad in ("a/b", "a\x7fb", "a\x85b"):
        sent = api.post("/v1/turns", json=turn_item(user_id=bad), headers=auth)
        assert_problem(sent, 422, "turns[0].user_id")  # the call's only item: a 422
        asked = api.post(
            "/v1/recall", json={"agent_id": "bot", "user_id": bad, "query": "t"}, headers=auth
        )
        refused = assert_problem(asked, 422, "user_id")
        assert refused["errors"][0]["message"] == "an id may not hold '/' or a control character"
        with pytest.raises(TurnRejected, match="user_id"):
            MemoryClient(api_settings, dispatch=False).enqueue_turn(turn_item(user_id=bad))
    MemoryClient(api_settings, dispatch=False).remember("bot", "ann", "Likes tea")
    padded = api.get("/v1/memories/bot/%20ann%20", headers=auth)
    assert [m["content"] for m in padded.json()["memories"]] == ["Likes tea"]
    sent = api.post("/v1/turns", json=turn_item(user_id=" ann "), headers=auth).json()
    assert sent["accepted"] == 1
    context = api.get("/v1/sessions/bot/ann%20/s1/context", headers=auth)
    assert context.status_code == 200 and "message 0" in context.json()["text"]
    # A user stored under the looser rule of earlier versions: still listed and erased.
    with session_scope(api_settings.storage) as session:
        make_memory(session, api_settings, "Stored long ago", user_id="team/ann")
    client = MemoryClient(api_settings, dispatch=False)
    assert [m.content for m in client.list("bot", "team/ann")] == ["Stored long ago"]
    assert client.erase("bot", "team/ann").rows["memories"] == 1
    assert client.list("bot", "team/ann") == []
    # Over HTTP, by a body holding the ids as stored, for a key that may use the scope.
    with session_scope(api_settings.storage) as session:
        make_memory(session, api_settings, "Stored long ago", user_id="team/ann")
    stored = {"agent_id": "bot", "user_id": "team/ann"}
    listed = api.post("/v1/stored-scopes/memories", json=stored, headers=auth)
    assert [m["content"] for m in listed.json()["memories"]] == ["Stored long ago"]
    other = api.post("/v1/stored-scopes/erase", json=stored, headers=bearer(keys.ann))
    assert_problem(other, 403)  # a key of user "ann" only
    for bad in ("team\\u0000ann", "team\\ud800"):  # never storable: refused, not a 500
        body = '{"agent_id": "bot", "user_id": "' + bad + '"}'
        headers = {**auth, "Content-Type": "application/json"}
        refused = api.post("/v1/stored-scopes/erase", content=body, headers=headers)
        assert_problem(refused, 422, "user_id")
    erased = api.post("/v1/stored-scopes/erase", json=stored, headers=auth)
    assert erased.status_code == 200 and erased.json()["rows"]["memories"] == 1
    assert client.list("bot", "team/ann") == []


BAD_BODIES: list[tuple[str, Any, str]] = [
    ("wrong type", turn_item(content=42), "turns[0].content"),
    ("wrong role", turn_item(role="robot"), "turns[0].role"),
    ("unknown field", {**turn_item(), "contnet": "typo"}, "turns[0].contnet"),
    ("blank", turn_item(content="\n"), "turns[0].content"),
    ("NUL byte", turn_item(content="a\x00b"), "turns[0].content"),
    ("no time zone", turn_item(timestamp="2026-11-22T10:00:00"), "turns[0].timestamp"),
    ("a number for a time", turn_item(timestamp=1763805600), "turns[0].timestamp"),
    ("a clock in 2099", turn_item(timestamp="2099-01-01T00:00:00Z"), "turns[0].timestamp"),
    (
        "nested wrong type",
        {"turns": [turn_item(metadata={"x": [1, {"y": None}]}, role=None)]},
        "turns[0].role",
    ),
    (
        "every item bad",
        {"turns": [turn_item(user_id=""), turn_item(session_id=7)]},
        "turns[1].session_id",
    ),
]


@pytest.mark.parametrize(("case", "body", "field"), BAD_BODIES, ids=[c for c, _, _ in BAD_BODIES])
def test_bad_turns_are_a_problem_naming_the_field_and_store_nothing(
    api: TestClient, keys: Keys, db: Session, case: str, body: Any, field: str
) -> None:
    response = api.post("/v1/turns", json=body, headers=bearer(keys.bot))
    assert_problem(response, 422, field)
    assert count_turns(db) == 0


@pytest.mark.parametrize(
    "raw",
    [b"{not json", b"[1, 2", b"", json.dumps({"turns": "nope"}).encode(), b'"a string"'],
)
def test_a_body_that_is_not_a_turn_payload_is_a_problem(
    api: TestClient, keys: Keys, db: Session, raw: bytes
) -> None:
    headers = {**bearer(keys.bot), "content-type": "application/json"}
    response = api.post("/v1/turns", content=raw, headers=headers)
    assert_problem(response, 422)
    assert count_turns(db) == 0


BAD_URLS: list[tuple[str, str]] = [
    ("/v1/batches?agent_id=a%00b", "agent_id"),
    ("/v1/dead-letters?agent_id=a%1bb", "agent_id"),
    ("/v1/stats?agent_id=%ff", "agent_id"),
    ("/v1/memories/bot/ann?category=user&x%00=1", "x"),
    ("/v1/memories/bot/a%00nn", "(path)"),
    ("/v1/sessions/bot/ann/s%00/context", "(path)"),
    ("/?q=tea%00&agent=bot", "q"),
    ("/batches?agent=%ed%a0%80", "agent"),
    # Both would read as "ann\ufffd": two users in one scope.
    ("/v1/memories/bot/ann%ff", "(path)"),
    ("/v1/memories/bot/ann%fe", "(path)"),
]


@pytest.mark.parametrize(("url", "field"), BAD_URLS, ids=[u for u, _ in BAD_URLS])
def test_a_nul_or_undecodable_byte_in_a_url_is_refused_before_the_database(
    api: TestClient, keys: Keys, url: str, field: str
) -> None:
    """PostgreSQL refuses NUL in text: reaching it, such a filter was a 500."""
    assert_problem(api.get(url, headers=bearer(keys.admin)), 422, field)


def test_a_huge_body_is_refused_before_it_is_read(
    api: TestClient, keys: Keys, db: Session, api_settings: Settings
) -> None:
    limit = api_settings.server.max_request_bytes
    huge = {"turns": [turn_item(content="x" * (limit + 10))]}
    declared = api.post("/v1/turns", json=huge, headers=bearer(keys.bot))
    body = assert_problem(declared, 413)
    assert body["type"] == "/problems/too-large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams in
        yield b'{"turns": [{"content": "'
        for _ in range(limit // 65536 + 2):
            yield b"x" * 65536
        yield b'"}]}'

    streamed = api.post(
        "/v1/turns",
        content=chunks(),
        headers={**bearer(keys.bot), "content-type": "application/json"},
    )
    assert_problem(streamed, 413)
    assert count_turns(db) == 0


def test_another_agents_ids_are_forbidden_and_nothing_is_stored(
    api: TestClient, keys: Keys, db: Session
) -> None:
    mixed = {"turns": [turn_item(0), turn_item(1, agent_id="other-bot")]}
    response = api.post("/v1/turns", json=mixed, headers=bearer(keys.bot))
    assert_problem(response, 403, "turns[1].agent_id")
    other_user = api.post("/v1/turns", json=turn_item(user_id="bob"), headers=bearer(keys.ann))
    assert_problem(other_user, 403)
    assert count_turns(db) == 0
    for path in ("/v1/memories/other-bot/ann", "/v1/memories/bot/bob"):
        assert_problem(api.get(path, headers=bearer(keys.ann)), 403)


def test_no_key_or_a_revoked_key_is_401(
    api: TestClient, keys: Keys, api_settings: Settings
) -> None:
    assert_problem(api.post("/v1/turns", json=turn_item()), 401)
    assert_problem(api.post("/v1/turns", json=turn_item(), headers=bearer("mk_nope")), 401)
    from memoryd.models.db import utcnow
    from memoryd.server.keys import list_keys, revoke_key

    with session_scope(api_settings.storage) as session:
        bot = next(k for k in list_keys(session) if k.name == "bot")
        revoke_key(session, bot.id, utcnow())
    response = api.get("/v1/memories/bot/ann", headers=bearer(keys.bot))
    assert_problem(response, 401)
    assert response.headers["www-authenticate"] == "Bearer"


def test_sessions_end_and_their_context_reads_back(api: TestClient, keys: Keys) -> None:
    turns = [turn_item(0, content="Call me Sam."), turn_item(1, role="assistant", content="Hi Sam")]
    api.post("/v1/turns", json={"turns": turns}, headers=bearer(keys.ann))
    ended = api.post("/v1/sessions/bot/ann/s1/end", headers=bearer(keys.ann))
    assert ended.status_code == 200 and ended.json() == {"ended": True}
    assert_problem(api.post("/v1/sessions/bot/ann/nope/end", headers=bearer(keys.ann)), 404)
    context = api.get("/v1/sessions/bot/ann/s1/context?token_budget=500", headers=bearer(keys.ann))
    assert context.json()["text"] == "user: Call me Sam.\nassistant: Hi Sam"
    assert_problem(
        api.get("/v1/sessions/bot/ann/s1/context?token_budget=0", headers=bearer(keys.ann)),
        422,
        "token_budget",
    )


def test_memories_are_created_read_edited_deleted_restored_with_history(
    api: TestClient, keys: Keys
) -> None:
    auth = bearer(keys.ann)
    created = api.post(
        "/v1/memories/bot/ann", json={"content": "Vegetarian", "tags": ["food"]}, headers=auth
    )
    assert created.status_code == 201, created.text
    memory = created.json()
    assert (memory["tier"], memory["status"], memory["tags"]) == ("long", "active", ["food"])
    base = f"/v1/memories/bot/ann/{memory['id']}"
    assert api.get(base, headers=auth).json()["content"] == "Vegetarian"
    edited = api.patch(base, json={"content": "Vegan since 2024"}, headers=auth)
    assert edited.json()["content"] == "Vegan since 2024"
    assert api.delete(base, headers=auth).json()["status"] == "deleted"
    listed = api.get("/v1/memories/bot/ann", headers=auth).json()["memories"]
    assert listed == []
    deleted = api.get("/v1/memories/bot/ann?status=deleted", headers=auth).json()["memories"]
    assert [m["id"] for m in deleted] == [memory["id"]]
    assert api.post(f"{base}/restore", headers=auth).json()["status"] == "active"
    kinds = [e["kind"] for e in api.get(f"{base}/history", headers=auth).json()]
    assert kinds == ["created", "updated", "deleted", "restored"]
    # Another user's key of the same agent: not found, never revealed.
    bob = api.get(f"/v1/memories/bot/bob/{memory['id']}", headers=bearer(keys.bot))
    assert_problem(bob, 404)
    assert_problem(api.patch(base, json={"colour": "red"}, headers=auth), 422, "colour")
    assert_problem(api.get("/v1/memories/bot/ann/0", headers=auth), 422, "memory_id")


def test_a_change_the_memorys_state_refuses_is_409_and_a_bug_is_500(
    api: TestClient,
    keys: Keys,
    api_settings: Settings,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    auth = bearer(keys.ann)
    old = api.post("/v1/memories/bot/ann", json={"content": "Lives in Lisbon"}, headers=auth)
    new = api.post("/v1/memories/bot/ann", json={"content": "Lives in Porto"}, headers=auth)
    with session_scope(api_settings.storage) as session:
        session.execute(
            update(Memory)
            .where(Memory.id == old.json()["id"])
            .values(status="superseded", superseded_by_id=new.json()["id"])
        )
    restored = api.post(f"/v1/memories/bot/ann/{old.json()['id']}/restore", headers=auth)
    body = assert_problem(restored, 409)
    assert f"superseded by {new.json()['id']}" in body["detail"]

    def broken(*args: Any, **kwargs: Any) -> None:
        raise ValueError("a bug, not a conflict")

    monkeypatch.setattr(MemoryClient, "restore", broken)
    answer = api.post(f"/v1/memories/bot/ann/{new.json()['id']}/restore", headers=auth)
    assert "a bug" not in assert_problem(answer, 500)["detail"]
    assert any("unexpected error on POST" in r.getMessage() for r in caplog.records)


def test_recall_and_context_read_the_scope(api: TestClient, keys: Keys) -> None:
    auth = bearer(keys.ann)
    api.post("/v1/memories/bot/ann", json={"content": "Vegetarian since 2020"}, headers=auth)
    api.post("/v1/memories/bot/ann", json={"content": "Lives in Lisbon"}, headers=auth)
    query = {"agent_id": "bot", "user_id": "ann", "query": "vegetarian dinner"}
    hits = api.post("/v1/recall", json={**query, "k": 5}, headers=auth).json()["memories"]
    assert [h["content"] for h in hits] == ["Vegetarian since 2020"]
    assert set(hits[0]["parts"]) >= {"keyword_rank", "similarity"}
    block = api.post("/v1/context", json=query, headers=auth).json()["context"]
    assert block.startswith("<memory-context>") and "[user] Vegetarian since 2020" in block
    assert "Lisbon" not in block
    nothing = api.post("/v1/context", json={**query, "query": "zzz"}, headers=auth)
    assert nothing.json() == {"context": ""}
    lone_surrogate = json.dumps({**query, "query": "\ud800"})  # valid JSON, not valid text
    headers = {**auth, "content-type": "application/json"}
    bad = api.post("/v1/recall", content=lone_surrogate, headers=headers)
    assert_problem(bad, 422, "query")


def test_the_context_route_follows_the_agents_injection_rules(api: TestClient, keys: Keys) -> None:
    auth = bearer(keys.bot)
    api.post("/v1/memories/bot/ann", json={"content": "Vegetarian since 2020"}, headers=auth)
    rules = {"inject_min_query_length": 12, "inject_first_round_empty": True}
    assert api.put("/v1/agents/bot/settings", json=rules, headers=auth).status_code == 200
    query = {"agent_id": "bot", "user_id": "ann", "query": "vegetarian"}

    def context(**changes: str) -> dict[str, str]:
        return dict(api.post("/v1/context", json={**query, **changes}, headers=auth).json())

    assert context() == {"context": ""}  # 10 characters
    assert "Vegetarian since 2020" in context(query="vegetarian dinner")["context"]
    assert context(query="vegetarian dinner", session_id="s1") == {"context": ""}  # no reply yet
    turn = turn_item(role="assistant", content="Hello!")
    assert api.post("/v1/turns", json=turn, headers=auth).status_code == 202
    assert "Vegetarian" in context(query="vegetarian dinner", session_id="s1")["context"]

    # The page's form keeps them (a field missing from it would reset them on save).
    sign_in(api, keys.admin)
    form = {"inject_first_round_empty": "on", "inject_long_term_triggers": "deploy, 部署"}
    assert api.post("/agents/bot/settings", data=form).status_code == 200
    saved = api.get("/v1/agents/bot/settings", headers=auth).json()["overrides"]
    assert (saved["inject_first_round_empty"], saved["inject_long_term_triggers"]) == (
        True,
        ["deploy", "部署"],
    )
    page = api.get("/agents", params={"agent": "bot"}).text
    assert 'value="deploy, 部署"' in page


def test_health_needs_no_key_and_operations_need_an_admin(api: TestClient, keys: Keys) -> None:
    assert api.get("/v1/health").json() == {"status": "ok", "database": "ok"}
    assert_problem(api.get("/v1/stats", headers=bearer(keys.bot)), 403)
    assert_problem(api.get("/v1/batches", headers=bearer(keys.bot)), 403)
    stats = api.get("/v1/stats", headers=bearer(keys.admin)).json()
    assert set(stats) == {"pipeline", "health"}
    assert_problem(api.get("/v1/dead-letters", headers=bearer(keys.bot)), 403)
    own = api.get("/v1/dead-letters?agent_id=bot", headers=bearer(keys.bot))
    assert own.status_code == 200 and own.json() == []


def test_dead_letters_are_skipped_or_purged_within_the_keys_scope(
    api: TestClient, keys: Keys, api_settings: Settings, db: Session
) -> None:
    add_turns(api_settings, 2, user_id="ann")
    add_turns(api_settings, 1, start=2, user_id="bob", session_id="s2")
    with session_scope(api_settings.storage) as session:
        session.execute(update(Turn).values(status=TurnStatus.FAILED))
    assert_problem(api.post("/v1/dead-letters/skip", json={}, headers=bearer(keys.bot)), 403)
    body = {"agent_id": "bot", "user_id": "ann"}
    skipped = api.post("/v1/dead-letters/skip", json=body, headers=bearer(keys.ann))
    assert skipped.status_code == 200 and skipped.json() == {"skipped": 2}
    purged = api.post("/v1/dead-letters/purge", json={}, headers=bearer(keys.admin))
    assert purged.status_code == 200 and purged.json() == {"purged": 1}
    statuses = db.execute(select(Turn.user_id, Turn.status)).all()
    assert sorted(tuple(row) for row in statuses) == [("ann", "skipped"), ("ann", "skipped")]


def test_unknown_paths_and_methods_are_problems_too(api: TestClient, keys: Keys) -> None:
    assert_problem(api.get("/v1/nothing-here", headers=bearer(keys.bot)), 404)
    assert_problem(api.put("/v1/turns", headers=bearer(keys.bot)), 405)


def test_health_tells_a_keyless_caller_only_up_or_down(api_settings: Settings) -> None:
    """The driver's error names hosts, users and sometimes more: it goes to the log."""
    down = api_settings.updated(
        **{"database_url": "postgresql+psycopg://ann:s3cret@127.0.0.1:9/memoryd"}
    )
    with TestClient(create_app(down, client=MemoryClient(down, dispatch=False))) as http:
        answer = http.get("/v1/health")
    assert answer.status_code == 503
    assert answer.json() == {"status": "unavailable", "database": "unavailable"}
