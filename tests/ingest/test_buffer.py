"""Ingest: per-item validation, idempotency, refused rows and batch triggers (buffer.py)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Connection, make_url, select, text
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.errors import TurnRejected
from memoryd.ingest.buffer import ingest, store_turns, validate_turns
from memoryd.ingest.chunks import CHUNK_TURNS, Chunk, store_pg_chunks
from memoryd.ingest.rows import turn_values
from memoryd.models.conversation_tables import ChatSession
from memoryd.models.db import get_engine, is_sqlite, session_factory, utcnow, write_connection
from memoryd.models.keys import SessionKey
from memoryd.models.schemas import IngestResult, TurnIn
from memoryd.models.tables import Turn
from memoryd.settings import Settings
from tests.factories import count_turns, turn_item

KEY = SessionKey("bot", "ann", "s1")


turn = turn_item


BAD_ITEMS = [
    (
        {"agent_id": "bot", "session_id": "s1", "role": "user", "content": "x"},
        "user_id",
        "Field required",
    ),
    (turn(role="robot"), "role", "Input should be"),
    (turn(content=""), "content", "at least 1 character"),
    (turn(content="   \n "), "content", "blank"),
    (turn(content="a\x00b"), "content", "NUL byte"),
    (turn(content="bad \ud800 surrogate"), "content", "unicode"),
    (turn(content=12), "content", "valid string"),
    (turn(agent_id=""), "agent_id", "at least 1 character"),
    (turn(user_id="*"), "user_id", "shared workspace"),
    (turn(timestamp="yesterday"), "timestamp", "not an ISO 8601 date and time"),
    # A time without a zone is ambiguous, and a number's unit is a guess: both refused.
    (turn(timestamp="2026-11-22T10:00:00"), "timestamp", "has no time zone"),
    (turn(timestamp=datetime(2026, 11, 22, 10)), "timestamp", "has no time zone"),
    (turn(timestamp="2026-11-22"), "timestamp", "has no time zone"),
    (turn(timestamp=1_763_805_600), "timestamp", "not an ISO 8601 date and time"),
    (turn(timestamp=1_763_805_600.5), "timestamp", "not an ISO 8601 date and time"),
    (turn(timestamp="1763805600"), "timestamp", "not an ISO 8601 date and time"),
    # Outside a sane range: before 2000, or ahead of the database clock.
    (turn(timestamp="1999-12-31T23:59:59Z"), "timestamp", "is before 2000-01-01"),
    (turn(timestamp="2099-01-01T00:00:00Z"), "timestamp", "ahead of the database clock"),
    (turn(timestamp="9999-12-31T23:59:59+00:00"), "timestamp", "ahead of the database clock"),
    (turn(timestamp="9999-12-31T23:00:00-05:00"), "timestamp", "out of range"),
    (turn(metadata=[1, 2]), "metadata", "dictionary"),
    (turn(colour="red"), "colour", "Extra inputs"),
    # Metadata is checked like content: one bad value must not sink the good turns of a
    # bulk call (PostgreSQL would refuse the whole statement).
    (turn(metadata={"score": math.nan}), "metadata", "metadata.score: nan is not a JSON"),
    (turn(metadata={"at": [1, math.inf]}), "metadata", "metadata.at[1]: inf is not a JSON"),
    (turn(metadata={"when": datetime(2026, 1, 1, tzinfo=UTC)}), "metadata", "ISO 8601"),
    (turn(metadata={"note": "bad \ud800"}), "metadata", "metadata.note is not valid Unicode"),
    (turn(metadata={"bad \udcff": 1}), "metadata", "metadata key is not valid Unicode"),
    (turn(metadata={"n": "a\x00b"}), "metadata", "metadata.n contains a NUL byte"),
    (turn(metadata={"set": {1, 2}}), "metadata", "a set is not a JSON value"),
]


@pytest.mark.parametrize(("item", "field", "message"), BAD_ITEMS)
def test_bad_turn_names_the_field_and_keeps_the_rest(
    settings: Settings, db: Session, item: dict[str, object], field: str, message: str
) -> None:
    client = MemoryClient(settings, dispatch=False)
    result = client.enqueue_turns([turn(1), item, turn(2)])
    assert result.accepted == 2
    assert [r["index"] for r in result.rejected] == [1]
    errors = result.rejected[0]["errors"]
    assert errors[0]["field"] == field
    assert message in errors[0]["message"]
    assert count_turns(db) == 2
    with pytest.raises(TurnRejected, match=field):
        client.enqueue_turn(item)


def test_huge_content_is_rejected_with_the_limit(settings: Settings, db: Session) -> None:
    client = MemoryClient(settings, dispatch=False)
    with pytest.raises(TurnRejected, match="MEMORYD_MAX_TURN_CHARS"):
        client.enqueue_turn(turn(content="x" * (settings.ingest.max_turn_chars + 1)))
    assert count_turns(db) == 0


def test_too_many_turns_in_one_call(settings: Settings) -> None:
    small = settings.updated(**{"max_bulk_turns": 3})
    with pytest.raises(TurnRejected, match="MEMORYD_MAX_BULK_TURNS"):
        validate_turns([turn(i) for i in range(4)], small.ingest)


def test_payload_shapes_of_the_ingest_task(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    assert client.ingest_payload({"turns": [turn(1), turn(2)]}).accepted == 2
    assert client.ingest_payload(turn(3)).accepted == 1
    assert client.ingest_payload([turn(4)]).accepted == 1
    with pytest.raises(TurnRejected, match="unknown payload keys"):
        client.ingest_payload({"turns": [], "extra": 1})
    with pytest.raises(TurnRejected, match="payload must be"):
        client.ingest_payload("hello")


def test_same_turn_key_twice_stores_one_turn(settings: Settings, db: Session) -> None:
    client = MemoryClient(settings, dispatch=False)
    first = client.enqueue_turn(turn(1, turn_key="k1"))
    again = client.enqueue_turns([turn(1, turn_key="k1"), turn(1, turn_key="k1")])
    assert (first.accepted, again.accepted, again.duplicates) == (1, 0, 2)
    # The key is per scope: another user may use it.
    assert client.enqueue_turn(turn(1, turn_key="k1", user_id="bob")).accepted == 1
    assert count_turns(db) == 2


# One statement, and on PostgreSQL chunks of about CHUNK_TURNS in one transaction,
# which take the turns session by session.
@pytest.mark.parametrize("size", [5, 5 * CHUNK_TURNS + 40])
def test_a_bulk_call_keeps_order_keys_and_counts_at_any_size(
    settings: Settings, db: Session, size: int
) -> None:
    client = MemoryClient(settings, dispatch=False)
    client.enqueue_turn(turn(0, turn_key="k0"))  # in s1; the call's own k0 is a repeat
    items = [turn(i, turn_key=f"k{i}", session_id=f"s{i % 2}", metadata={"i": i})
             for i in range(size)]  # fmt: skip
    items.insert(3, turn(2, turn_key="k2", session_id="s0"))  # a repeat inside the call
    items.append(turn(1, turn_key="k1", session_id="s1"))  # and in another chunk
    result = client.enqueue_turns(items)
    assert (result.accepted, result.duplicates, result.rejected) == (size - 1, 3, [])
    columns = (Turn.id, Turn.session_id, Turn.content, Turn.metadata_)
    stored = db.execute(select(*columns).order_by(Turn.id)).all()
    sessions = {0: "s1"} | {i: f"s{i % 2}" for i in range(1, size)}
    for chat in ("s0", "s1"):  # each session's turns in the order they were sent
        said = [i for i in range(size) if sessions[i] == chat]
        in_session = [t for t in stored if t.session_id == chat]
        assert [t.content for t in in_session] == [f"message {i}" for i in said]
        assert [t.metadata_ for t in in_session if t.id != stored[0].id] == [
            {"i": i} for i in said if i > 0
        ]
    assert result.turn_ids == [t.id for t in stored[1:]]
    pending = dict(db.execute(select(ChatSession.session_id, ChatSession.pending_count)).all())
    assert pending == {"s1": 1 + size // 2, "s0": (size + 1) // 2 - 1}
    assert client.enqueue_turns(items).duplicates == size + 2  # a second call on the pool


def test_a_large_call_orders_its_sessions_as_validation_reads_their_ids(
    settings: Settings, db: Session
) -> None:
    """ " s1 " is s1 once validated: the chunks' session order is the validated ids'
    order, or s1's later turns would get ids before its earlier ones."""
    sessions = ["s1"] * 150 + ["b"] * 100 + [" s1 "] * 150
    items = [turn(i, session_id=chat) for i, chat in enumerate(sessions)]
    assert MemoryClient(settings, dispatch=False).enqueue_turns(items).accepted == len(items)
    in_s1 = select(Turn.content).where(Turn.session_id == "s1").order_by(Turn.id)
    expected = [f"message {i}" for i, chat in enumerate(sessions) if chat != "b"]
    assert db.scalars(in_s1).all() == expected


def test_bulk_calls_over_the_same_sessions_in_opposite_orders_do_not_deadlock(
    backend: str, settings: Settings, db: Session, caplog: pytest.LogCaptureFixture
) -> None:
    """A large call inserts its turns in several statements of one transaction, each
    bumping the sessions whose turns are all in: taken in the call's order, two calls
    over the same sessions in opposite orders would each hold what the other waits for.
    A call takes its turns in session order, and locks its sessions in key order."""
    if backend != "postgres":
        pytest.skip("SQLite's write lock lets one call in at a time")
    sessions = [f"s{i:03d}" for i in range(3 * CHUNK_TURNS)]
    forward = [turn(i, session_id=chat) for i, chat in enumerate(sessions)]
    rounds, failures = 4, list[Exception]()
    for _ in range(rounds):
        start = threading.Barrier(2)
        threads = [
            threading.Thread(target=_send_at_once, args=(settings, items, start, failures))
            for items in (forward, forward[::-1])
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    assert failures == []
    assert "deadlock" not in caplog.text  # none met, so none stored again
    pending = db.execute(select(ChatSession.pending_count)).scalars().all()
    assert pending == [2 * rounds] * len(sessions)


def test_a_large_call_stores_nothing_when_a_later_chunk_fails(
    backend: str, settings: Settings, db: Session
) -> None:
    """The chunks are one transaction: a chunk that cannot be built after others were
    sent (here the generator fails) leaves no turn and no session behind."""
    if backend != "postgres":
        pytest.skip("chunks are PostgreSQL's")
    now = utcnow()
    first = [turn_values(TurnIn.model_validate(turn(i)), now) for i in range(CHUNK_TURNS)]

    def chunks() -> Iterator[Chunk]:
        yield Chunk(first, ("bot", "ann", "s1"))  # s1 goes on in the next chunk
        raise RuntimeError("the second chunk could not be built")

    with pytest.raises(RuntimeError), write_connection(settings.storage) as conn:
        assert not isinstance(conn, Connection)
        store_pg_chunks(conn, chunks(), now, conn.invalidate)
    assert count_turns(db) == 0
    assert db.execute(select(ChatSession.session_id)).all() == []


def test_a_large_call_of_bad_items_opens_no_transaction(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every item rejected: the call answers with their errors and never asks the
    database for a connection (an outage must not turn a 422 into a 503)."""
    from memoryd.ingest import buffer

    monkeypatch.setattr(buffer, "write_connection", None)  # any use fails
    items = [{"role": "user", "content": f"no ids {i}"} for i in range(2 * CHUNK_TURNS + 1)]
    result = MemoryClient(settings, dispatch=False).enqueue_turns(items)
    assert result.accepted == 0
    assert [r["index"] for r in result.rejected] == list(range(len(items)))


def test_single_turns_sent_during_a_large_call_of_their_keys_do_not_deadlock(
    backend: str, settings: Settings, db: Session, caplog: pytest.LogCaptureFixture
) -> None:
    """A history import and the live backend storing the same messages at once: a single
    enqueue stores a key the large call has yet to reach, then waits for its session.
    Had the call bumped that session with an earlier chunk, the chunk holding the key
    would wait for it: a cycle. A session cut by a chunk's end (sessions of 150 turns
    here, against chunks of CHUNK_TURNS) is bumped only once its last turn is in."""
    if backend != "postgres":
        pytest.skip("SQLite's write lock lets one call in at a time")
    size, failures = 3 * CHUNK_TURNS, list[Exception]()
    for round_ in range(3):
        items = [turn(i, turn_key=f"r{round_}-k{i}", session_id=f"s{i // 150}")
                 for i in range(size)]  # fmt: skip
        done = threading.Event()
        threads = [
            threading.Thread(target=_send_live, args=(settings, items[start::7], done, failures))
            for start in range(CHUNK_TURNS, CHUNK_TURNS + 4)
        ]
        for thread in threads:
            thread.start()
        try:
            MemoryClient(settings, dispatch=False).enqueue_turns(items)
        except Exception as error:
            failures.append(error)
        done.set()
        for thread in threads:
            thread.join(timeout=60)
    assert failures == []
    assert "deadlock" not in caplog.text  # none met, so none stored again
    assert count_turns(db) == 3 * size
    pending = db.execute(select(ChatSession.pending_count)).scalars().all()
    assert pending == [3 * 150] * (size // 150)


def _send_live(
    settings: Settings,
    items: list[dict[str, Any]],
    done: threading.Event,
    failures: list[Exception],
) -> None:
    """Send the items one by one until `done`, as a chat backend does."""
    client = MemoryClient(settings, dispatch=False)
    for item in items:
        if done.is_set():
            return
        try:
            client.enqueue_turn(item)
        except Exception as error:
            failures.append(error)


def _send_at_once(
    settings: Settings,
    items: list[dict[str, Any]],
    start: threading.Barrier,
    failures: list[Exception],
) -> None:
    start.wait()
    try:
        MemoryClient(settings, dispatch=False).enqueue_turns(items)
    except Exception as error:
        failures.append(error)


def test_a_key_another_call_stores_during_a_bulk_call_is_stored_once(
    backend: str, settings: Settings, db: Session
) -> None:
    """Two imports of one history at once (a retried job): a key the other call stored
    and has not committed yet is waited for, then counted a duplicate, not a failed call
    or a second turn."""
    if backend != "postgres":
        pytest.skip("SQLite's write lock lets no other call in between")
    items = [turn(i, turn_key=f"k{i}", session_id=f"s{i % 2}") for i in range(CHUNK_TURNS + 10)]
    with get_engine(settings.storage).connect() as other:
        other_call = other.begin()
        # The other call stored k7 (in a session of its own, so that the key is all the
        # two calls share) and has not committed: the bulk call cannot see it yet.
        k7 = TurnIn.model_validate({**items[7], "session_id": "elsewhere"})
        store_turns(other, settings.extraction, [k7], utcnow())
        outcome: list[IngestResult] = []
        bulk = threading.Thread(
            target=lambda: outcome.append(
                MemoryClient(settings, dispatch=False).enqueue_turns(items)
            )
        )
        bulk.start()
        assert _waits_on_a_lock(db, seconds=30)  # on k7's entry in the key index
        other_call.commit()
    bulk.join(timeout=30)
    result = outcome[0]
    assert (result.accepted, result.duplicates, result.rejected) == (len(items) - 1, 1, [])
    keys = db.scalars(select(Turn.turn_key).order_by(Turn.id)).all()
    assert sorted(keys) == sorted(item["turn_key"] for item in items)
    stored = db.execute(select(Turn.id).where(Turn.session_id != "elsewhere")).scalars().all()
    assert sorted(result.turn_ids) == sorted(stored)
    pending = dict(db.execute(select(ChatSession.session_id, ChatSession.pending_count)).all())
    assert pending == {"s0": len(items) // 2, "s1": len(items) // 2 - 1, "elsewhere": 1}


def test_a_bulk_call_ended_by_a_deadlock_is_stored_again(
    backend: str, settings: Settings, db: Session, caplog: pytest.LogCaptureFixture
) -> None:
    """A turn key sent under another session of its user closes a cycle that no lock
    order prevents: another call stored the key in session a and then waits for a,
    which the bulk call bumped with its first chunk while its second chunk waits for
    the key. PostgreSQL ends the bulk call, which checks for the cycle first; it stores
    its turns again once the other call is in, and every key is stored once."""
    if backend != "postgres":
        pytest.skip("SQLite's write lock lets one call in at a time")
    items = [turn(i, turn_key=f"k{i}", session_id="a" if i < 100 else "a2") for i in range(200)]
    items += [turn(i, turn_key=f"k{i}", session_id="b") for i in range(200, 400)]
    outcome: list[IngestResult | Exception] = []
    # A session checks for a deadlock once, deadlock_timeout after it began to wait. The
    # bulk call's check comes 3 s after its wait and the other call's 60 s after its own:
    # on a loaded machine, the cycle may close more than the default 1 s after the bulk
    # call began to wait, which would leave the check, and the ending, to the other call.
    # (Setting deadlock_timeout takes a superuser, as the suite's server role is.)
    bulk_settings = settings.updated(
        database_url=make_url(settings.storage.database_url)
        .update_query_dict({"options": "-c deadlock_timeout=3s"})
        .render_as_string(hide_password=False)
    )

    def bulk_call() -> None:
        try:
            outcome.append(MemoryClient(bulk_settings, dispatch=False).enqueue_turns(items))
        except Exception as error:
            outcome.append(error)

    with get_engine(settings.storage).connect() as other:
        other_call = other.begin()
        other.execute(text("SET LOCAL deadlock_timeout = '60s'"))
        # The other call's turn, under session a, and its session's counter after it.
        other.execute(
            text(
                "INSERT INTO turns (agent_id, user_id, session_id, role, content, turn_key,"
                " created_at, received_at, status, attempts, token_count, lost_leases)"
                " VALUES ('bot', 'ann', 'a', 'user', 'k399 again', 'k399', now(), now(),"
                " 'pending', 0, 3, 0)"
            )
        )
        bulk = threading.Thread(target=bulk_call)
        bulk.start()
        assert _waits_on_a_lock(db, seconds=30)  # the second chunk, on k399
        other.execute(
            text(
                "INSERT INTO sessions (agent_id, user_id, session_id, last_activity_at,"
                " pending_count) VALUES ('bot', 'ann', 'a', now(), 1)"
                " ON CONFLICT (agent_id, user_id, session_id)"
                " DO UPDATE SET pending_count = sessions.pending_count + 1"
            )
        )
        other_call.commit()
    bulk.join(timeout=60)
    assert len(outcome) == 1 and isinstance(outcome[0], IngestResult), outcome
    assert (outcome[0].accepted, outcome[0].duplicates) == (len(items) - 1, 1)
    assert "met a deadlock (attempt 1); storing it again" in caplog.text
    keys = db.scalars(select(Turn.turn_key)).all()
    assert sorted(keys) == sorted(f"k{i}" for i in range(400))


def test_a_single_turn_ended_by_a_deadlock_is_stored_again(
    backend: str, settings: Settings, db: Session, caplog: pytest.LogCaptureFixture
) -> None:
    """The same cycle with a real single enqueue, which stores its key and waits for its
    session in one statement. PostgreSQL ends whichever call checks for the cycle first
    once it is closed: the single call usually, since it waits first, but the bulk call
    when the single one checked (deadlock_timeout after it began waiting) before the
    cycle closed. Either way the ended call stores its turns again and k399 is stored
    once, the other call counting it a duplicate."""
    if backend != "postgres":
        pytest.skip("SQLite's write lock lets one call in at a time")
    items = [turn(i, turn_key=f"k{i}", session_id="a" if i < 100 else "a2") for i in range(200)]
    items += [turn(i, turn_key=f"k{i}", session_id="b") for i in range(200, 400)]
    outcome: dict[str, IngestResult | Exception] = {}

    def send(name: str, payload: list[dict[str, Any]]) -> threading.Thread:
        def call() -> None:
            try:
                outcome[name] = MemoryClient(settings, dispatch=False).enqueue_turns(payload)
            except Exception as error:
                outcome[name] = error

        thread = threading.Thread(target=call)
        thread.start()
        return thread

    with get_engine(settings.storage).connect() as gate:
        held = gate.begin()  # holds k250, so the bulk call stops in its second chunk
        store_turns(gate, settings.extraction, [TurnIn.model_validate(items[250])], utcnow())
        bulk = send("bulk", items)
        assert _waits_on_a_lock(db, seconds=30)
        single = send("single", [{**items[399], "session_id": "a"}])
        assert _waits_on_a_lock(db, seconds=30, at_least=2)  # on session a
        held.rollback()  # the bulk call goes on to k399, which the single one holds
    for thread in (bulk, single):
        thread.join(timeout=60)
    bulk_result, single_result = outcome["bulk"], outcome["single"]
    assert isinstance(bulk_result, IngestResult), bulk_result
    assert isinstance(single_result, IngestResult), single_result
    accepted = bulk_result.accepted + single_result.accepted
    duplicates = bulk_result.duplicates + single_result.duplicates
    assert (accepted, duplicates) == (len(items), 1)
    assert "met a deadlock (attempt 1); storing it again" in caplog.text
    keys = db.scalars(select(Turn.turn_key)).all()
    assert sorted(keys) == sorted(f"k{i}" for i in range(400))
    # k399 is in the session of the call that stored it: the one not counting it twice.
    stored_by = "single" if single_result.accepted else "bulk"
    k399 = db.scalar(select(Turn.session_id).where(Turn.turn_key == "k399"))
    assert k399 == {"single": "a", "bulk": "b"}[stored_by]


def test_a_cut_session_is_counted_when_the_chunks_after_it_are_all_refused(
    backend: str, settings: Settings, db: Session
) -> None:
    """s1's 250 good turns span two chunks; its last 200 items are refused, so the
    chunk after them stores nothing and the count carried for s1 is bumped alone."""
    items = [turn(i) for i in range(250)] + [turn(i, content="") for i in range(250, 450)]
    result = MemoryClient(settings, dispatch=False).enqueue_turns(items)
    assert (result.accepted, [r["index"] for r in result.rejected]) == (250, list(range(250, 450)))
    assert db.execute(select(ChatSession.pending_count)).scalar_one() == 250


def _waits_on_a_lock(db: Session, seconds: float, at_least: int = 1) -> bool:
    """`at_least` other connections of this database wait on a lock, within `seconds`."""
    waiting = text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
    )
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = db.execute(waiting).scalar_one()
        db.rollback()  # a fresh snapshot of the activity view each time
        if found >= at_least:
            return True
        time.sleep(0.05)
    return False


def test_metadata_over_the_size_limit_is_rejected_alone(settings: Settings, db: Session) -> None:
    small = settings.updated(**{"max_metadata_bytes": 100})
    result, _ = ingest(small, [turn(1), turn(2, metadata={"blob": "x" * 200})], utcnow())
    assert result.accepted == 1
    assert result.rejected[0]["errors"][0]["field"] == "metadata"
    assert "MEMORYD_MAX_METADATA_BYTES" in result.rejected[0]["errors"][0]["message"]
    assert count_turns(db) == 1


def test_a_message_delivered_twice_without_turn_keys_stores_each_turn_once(
    settings: Settings, db: Session
) -> None:
    """What the ingest task does with a redelivered message (acks_late after a crash):
    keys derived from the task id and the item's index."""
    items = [turn(1), turn(2), turn(3, turn_key="caller-key")]
    first, _ = ingest(settings, items, utcnow(), key_prefix="task:abc")
    again, _ = ingest(settings, items, utcnow(), key_prefix="task:abc")
    assert (first.accepted, again.accepted, again.duplicates) == (3, 0, 3)
    keys = db.scalars(select(Turn.turn_key).order_by(Turn.id)).all()
    assert keys == ["task:abc:0", "task:abc:1", "caller-key"]  # a caller's key is kept
    other, _ = ingest(settings, items[:2], utcnow(), key_prefix="task:xyz")
    assert other.accepted == 2  # another message with the same text is other turns


def _refuse_poison(settings: Settings) -> None:
    """Make the database itself refuse one row that passes every check of ours."""
    with get_engine(settings.storage).begin() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql(
                "CREATE TRIGGER refuse_poison BEFORE INSERT ON turns "
                "WHEN new.content LIKE '%poison%' BEGIN SELECT RAISE(ABORT, 'poison row'); END"
            )
        else:
            conn.execute(
                text(
                    "CREATE OR REPLACE FUNCTION refuse_poison() RETURNS trigger AS $$ BEGIN "
                    "IF new.content LIKE '%poison%' THEN RAISE EXCEPTION 'poison row' "
                    "USING ERRCODE = '22000'; END IF; RETURN new; END $$ LANGUAGE plpgsql"
                )
            )
            conn.execute(
                text(
                    "CREATE TRIGGER refuse_poison BEFORE INSERT ON turns "
                    "FOR EACH ROW EXECUTE FUNCTION refuse_poison()"
                )
            )


def _drop_refusal(settings: Settings) -> None:
    with get_engine(settings.storage).begin() as conn:
        conn.exec_driver_sql(
            "DROP TRIGGER IF EXISTS refuse_poison"
            + ("" if is_sqlite(session_factory(settings.storage)()) else " ON turns")
        )


def test_a_row_the_database_refuses_costs_only_itself(settings: Settings, db: Session) -> None:
    _refuse_poison(settings)
    try:
        items = [turn(1), turn(2, content="poison pill"), turn(3), turn(4, content="x\x00")]
        result = MemoryClient(settings, dispatch=False).enqueue_turns(items)
        # In chunks on PostgreSQL: the poison in the first chunk, a bad item in the
        # last, which may not be validated yet when the refusal comes.
        many = [turn(9, content="poison")] + [turn(i) for i in range(10, 10 + 2 * CHUNK_TURNS)]
        many.append({"agent_id": "zz", "role": "user"})
        copied = MemoryClient(settings, dispatch=False).enqueue_turns(many)
    finally:
        _drop_refusal(settings)
    assert result.accepted == 2
    assert [r["index"] for r in result.rejected] == [1, 3]
    assert (
        "the database refused this turn: poison row" in result.rejected[0]["errors"][0]["message"]
    )
    n = 2 * CHUNK_TURNS
    assert (copied.accepted, [r["index"] for r in copied.rejected]) == (n, [0, n + 1])
    assert "the database refused" in copied.rejected[0]["errors"][0]["message"]
    assert "user_id" in [e["field"] for e in copied.rejected[1]["errors"]]
    assert count_turns(db) == 2 + n


def test_dispatch_when_pending_turns_cross_batch_size(settings: Settings) -> None:
    small = settings.updated(**{"batch_size": 4})
    with session_factory(small.storage)() as db:
        _, due = store_turns(
            db,
            small.extraction,
            validate_turns([turn(i) for i in range(3)], small.ingest)[0],
            utcnow(),
        )
        assert due == []
        _, due = store_turns(
            db, small.extraction, validate_turns([turn(3)], small.ingest)[0], utcnow()
        )
        assert due == [KEY]
        _, due = store_turns(
            db,
            small.extraction,
            validate_turns([turn(i) for i in range(4, 11)], small.ingest)[0],
            utcnow(),
        )
        assert due == [KEY]  # crossed 8 once, not once per turn
        db.rollback()


@pytest.mark.parametrize(
    ("task", "args", "said"),
    [
        ("ingest", [], "ingest_turns: missing a required argument: 'payload'"),
        ("ingest", [{"turns": []}, "more"], "ingest_turns: too many positional arguments"),
        ("extract", [1, 2, 3], "agent_id: Input should be a valid string"),
        ("extract", [["bot"], {"u": 1}, "s1"], "user_id: Input should be a valid string"),
        ("extract", ["bot\x00", "ann", "s1"], "agent_id: id contains a NUL byte"),
    ],
)
def test_a_task_sent_with_arguments_it_cannot_use_says_which(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, task: str, args: list[Any], said: str
) -> None:
    """Any Celery client may send the tasks: a message with other arguments was a bug
    naming nothing ('unexpected TypeError in run'), a failed statement, or extracted no
    session at all and reported success. It is refused, naming the argument."""
    from memoryd.errors import TaskRejected
    from memoryd.tasks import extraction, ingest

    sent = {"ingest": ingest.ingest_turns, "extract": extraction.extract_session}[task]
    monkeypatch.setattr(ingest, "get_settings", lambda: settings)
    monkeypatch.setattr(extraction, "get_settings", lambda: settings)
    outcome = sent.apply(args=args)
    assert isinstance(outcome.result, TaskRejected), outcome.result
    assert said in str(outcome.result)


def test_a_payload_whose_turns_are_no_list_says_so(settings: Settings) -> None:
    client = MemoryClient(settings, dispatch=False)
    with pytest.raises(TurnRejected, match="got turns: NoneType"):
        client.ingest_payload({"turns": None})
