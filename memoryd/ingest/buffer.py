"""The turn buffer: validated, idempotent ingest of dialogue turns.

The database is the source of truth; broker messages only say "look at this session"
(claims and the sweeper live in leases.py, publishing triggers in dispatch.py).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from pydantic import TypeAdapter, ValidationError
from sqlalchemy import Connection, exc, update
from sqlalchemy.orm import Session
from sqlalchemy.pool import PoolProxiedConnection

from memoryd.errors import TurnRejected, field_errors
from memoryd.ingest import chunks
from memoryd.ingest import rows as rows_sql
from memoryd.models.coordination import database_now
from memoryd.models.db import rowcount, write_connection
from memoryd.models.keys import SessionKey, session_pk
from memoryd.models.schemas import Ident, IngestResult, TurnIn
from memoryd.models.tables import ChatSession
from memoryd.settings import ExtractionSettings, IngestSettings, Settings

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------ validation


def payload_items(payload: Any) -> list[Any]:
    """The turns of a `memoryd.ingest_turns` payload: {"turns": [...]}, a list, or one turn."""
    if isinstance(payload, Mapping) and "turns" in payload:
        extra = set(payload) - {"turns"}
        if extra:
            raise TurnRejected(f"unknown payload keys {sorted(extra)}; expected only 'turns'")
        items = payload["turns"]
    elif isinstance(payload, Mapping):
        items = [payload]
    else:
        items = payload
    if not isinstance(items, list):
        given = items if isinstance(payload, Mapping) else payload
        raise TurnRejected(
            "payload must be a turn, a list of turns or an object with a 'turns' list;"
            f" got {'turns: ' if given is not payload else ''}{type(given).__name__}"
        )
    return items


def validate_turns(
    items: Sequence[Mapping[str, Any] | TurnIn],
    settings: IngestSettings,
    key_prefix: str | None = None,
) -> tuple[list[TurnIn], list[dict[str, Any]]]:
    """Validate each item on its own: good items go on, bad ones are reported by index."""
    good, bad = _validate(items, settings, key_prefix)
    return [turn for _index, turn in good], bad


def _validate(
    items: Sequence[Mapping[str, Any] | TurnIn], settings: IngestSettings, key_prefix: str | None
) -> tuple[list[tuple[int, TurnIn]], list[dict[str, Any]]]:
    """Good items with their index, and bad ones reported by index with field errors."""
    _check_size(items, settings)
    bad: list[dict[str, Any]] = []
    return _validated(enumerate(items), settings, key_prefix, bad), bad


def _check_size(items: Sequence[Any], settings: IngestSettings) -> None:
    if len(items) > settings.max_bulk_turns:
        raise TurnRejected(
            f"{len(items)} turns in one call; the limit is {settings.max_bulk_turns} "
            "(MEMORYD_MAX_BULK_TURNS): split the call"
        )


def _validated(
    items: Iterable[tuple[int, Mapping[str, Any] | TurnIn]],
    settings: IngestSettings,
    key_prefix: str | None,
    bad: list[dict[str, Any]],
) -> list[tuple[int, TurnIn]]:
    """The good (index, item) pairs as turns; each bad one goes to `bad` with its field
    errors. With `key_prefix`, an item without a turn_key gets `<prefix>:<index>`, so the
    same message stored twice (a redelivery) stores each turn once."""
    good: list[tuple[int, TurnIn]] = []
    for index, item in items:
        try:
            turn = item if isinstance(item, TurnIn) else TurnIn.model_validate(item)
        except ValidationError as exc:
            bad.append({"index": index, "errors": _field_errors(exc)})
            continue
        except (TypeError, ValueError) as exc:
            bad.append(_rejected(index, "", str(exc)))
            continue
        if len(turn.content) > settings.max_turn_chars:
            message = (
                f"content has {len(turn.content)} characters; the limit is "
                f"{settings.max_turn_chars} (MEMORYD_MAX_TURN_CHARS)"
            )
            bad.append(_rejected(index, "content", message))
            continue
        size = _metadata_bytes(turn.metadata)
        if size > settings.max_metadata_bytes:
            message = (
                f"metadata is {size} bytes as JSON; the limit is {settings.max_metadata_bytes} "
                "(MEMORYD_MAX_METADATA_BYTES)"
            )
            bad.append(_rejected(index, "metadata", message))
            continue
        if turn.turn_key is None and key_prefix is not None:
            turn = turn.model_copy(update={"turn_key": f"{key_prefix}:{index}"})
        good.append((index, turn))
    return good


def _not_ahead_of_the_clock(
    settings: Settings,
    good: list[tuple[int, TurnIn]],
    bad: list[dict[str, Any]],
    clock: datetime | None = None,
) -> list[tuple[int, TurnIn]]:
    """Turns not stamped later than the database clock allows; the others go to `bad`.
    A turn from a sender whose clock is ahead would count as said after every later turn,
    and its facts would outrank what the user says next. `clock` is the database's
    clock when the caller read it already."""
    if all(turn.timestamp is None for _index, turn in good):
        return good  # the common case costs no clock read
    now = clock or database_now(settings.storage)
    latest = now + timedelta(seconds=settings.ingest.max_clock_skew_seconds)
    kept: list[tuple[int, TurnIn]] = []
    for index, turn in good:
        if turn.timestamp is not None and turn.timestamp > latest:
            message = (
                f"timestamp {turn.timestamp.isoformat()} is ahead of the database clock "
                f"({now.isoformat(timespec='seconds')}) by more than "
                f"{settings.ingest.max_clock_skew_seconds:g} s (MEMORYD_MAX_CLOCK_SKEW_SECONDS): "
                "fix the sender's clock, or leave timestamp out to mean now"
            )
            bad.append(_rejected(index, "timestamp", message))
        else:
            kept.append((index, turn))
    return kept


def _rejected(index: int, field: str, message: str) -> dict[str, Any]:
    return {"index": index, "errors": [{"field": field, "message": message}]}


def _metadata_bytes(meta: dict[str, Any] | None) -> int:
    return 0 if meta is None else len(rows_sql.meta_json(meta) or "")


def _field_errors(exc: ValidationError) -> list[dict[str, str]]:
    return [{"field": f or "(payload)", "message": m} for f, m in field_errors(exc)]


# --------------------------------------------------------------------------------- ingest


def store_turns(
    db: Session | Connection | PoolProxiedConnection,
    settings: ExtractionSettings,
    turns: Sequence[TurnIn],
    now: datetime,
) -> tuple[IngestResult, list[SessionKey]]:
    """Insert validated turns (a repeated turn_key is a no-op) and bump their sessions.

    `db` is an ORM session, a Core connection, or what db.write_connection gives (the
    client's hot path skips the ORM).

    Returns the result and the sessions whose pending turns just crossed a multiple of
    `batch_size`: the caller dispatches those after commit.
    """
    result = IngestResult()
    if not turns:
        return result, []
    conn = db.connection() if isinstance(db, Session) else db
    ids, touched = rows_sql.store(conn, turns, now)
    return _stored_result(len(turns), ids), _due(touched, settings.batch_size)


def _stored_result(stored: int, ids: list[int]) -> IngestResult:
    """The result of storing `stored` good turns, of which those `ids` were new."""
    return IngestResult(accepted=len(ids), duplicates=stored - len(ids), turn_ids=sorted(ids))


def _due(touched: list[tuple[SessionKey, int, int]], size: int) -> list[SessionKey]:
    """The sessions whose pending turns crossed a multiple of `size`, each once."""
    due = [key for key, before, added in touched if (before + added) // size > before // size]
    return list(dict.fromkeys(due))


def ingest(
    settings: Settings,
    items: Sequence[Mapping[str, Any] | TurnIn],
    now: datetime,
    key_prefix: str | None = None,
) -> tuple[IngestResult, list[SessionKey]]:
    """Validate each item and store the good ones; bad ones are reported by index.

    Returns the result and the sessions to trigger, which the caller sends only now that
    the turns are committed.
    """
    _check_size(items, settings.ingest)
    on_postgres = not settings.storage.resolved_database_url.startswith("sqlite")
    if on_postgres and len(items) > chunks.CHUNK_TURNS:
        return _ingest_in_chunks(settings, items, now, key_prefix)
    good, bad = _validate(items, settings.ingest, key_prefix)
    good = _not_ahead_of_the_clock(settings, good, bad)
    result, due = IngestResult(), list[SessionKey]()
    if good:  # no transaction at all when every item was rejected

        def store(_again: bool) -> tuple[IngestResult, list[SessionKey]]:
            # One statement on PostgreSQL, so autocommit makes it a single round trip.
            with write_connection(settings.storage) as conn:
                return store_turns(conn, settings.extraction, [t for _i, t in good], now)

        try:
            result, due = rows_sql.again_after_deadlock(store)
        except REFUSED_BY_DATABASE:
            # The database refused a row that passed validation: store item by item, so
            # the refused one costs only itself.
            result, due = _store_one_by_one(settings, good, now, bad)
    result.rejected = sorted(bad, key=lambda r: int(r["index"]))
    return result, due


def _ingest_in_chunks(
    settings: Settings,
    items: Sequence[Mapping[str, Any] | TurnIn],
    now: datetime,
    key_prefix: str | None,
) -> tuple[IngestResult, list[SessionKey]]:
    """ingest() of a large call on PostgreSQL: validated a chunk at a time, each chunk
    stored while the next is validated, in one transaction, the items taken in session
    order (chunks.py)."""
    good: list[tuple[int, TurnIn]] = []
    bad: list[dict[str, Any]] = []
    # Read before the write transaction opens, so that it never holds a connection
    # while waiting for a second one.
    clock = database_now(settings.storage) if any(map(_stamped, items)) else None

    def validated_chunks() -> Iterator[chunks.Chunk]:
        for part, cut in chunks.in_session_order(enumerate(items), _named_session):
            checked = _validated(part, settings.ingest, key_prefix, bad)
            checked = _not_ahead_of_the_clock(settings, checked, bad, clock)
            good.extend(checked)
            yield chunks.Chunk([rows_sql.turn_values(turn, now) for _i, turn in checked], cut)

    validating = validated_chunks()
    first = next((chunk for chunk in validating if chunk.values), None)
    if first is None:  # every item rejected: no transaction at all, as ingest() does
        return IngestResult(rejected=sorted(bad, key=lambda r: int(r["index"]))), []
    try:
        ids, touched = _store_chunks(settings, itertools.chain([first], validating), good, now)
        result, due = _stored_result(len(good), ids), _due(touched, settings.extraction.batch_size)
    except REFUSED_BY_DATABASE:
        for _rest in validating:  # every item validated, as the other path does first
            pass
        result, due = _store_one_by_one(settings, good, now, bad)
    result.rejected = sorted(bad, key=lambda r: int(r["index"]))
    return result, due


def _store_chunks(
    settings: Settings,
    stream: Iterator[chunks.Chunk],
    good: list[tuple[int, TurnIn]],
    now: datetime,
) -> rows_sql.Stored:
    """chunks.store_pg_chunks of `stream`; after a deadlock (rows.again_after_deadlock),
    of `good` once `stream` has filled it."""

    def store(again: bool) -> rows_sql.Stored:
        nonlocal stream
        if again:
            for _rest in stream:  # every item validated into `good`
                pass
            stream = chunks.of_values([rows_sql.turn_values(turn, now) for _i, turn in good])
        with write_connection(settings.storage) as conn:
            assert not isinstance(conn, Connection)  # PostgreSQL's own connection
            return chunks.store_pg_chunks(conn, stream, now, conn.invalidate)

    return rows_sql.again_after_deadlock(store)


def _named_session(indexed: tuple[int, Mapping[str, Any] | TurnIn]) -> chunks.SessionOf:
    """The session an item, valid or not, names, as validation will read it (the order
    of chunks.in_session_order)."""
    _index, item = indexed
    if isinstance(item, TurnIn):
        return item.agent_id, item.user_id, item.session_id
    if not isinstance(item, Mapping):
        return "", "", ""
    agent, user, chat = (item.get(name) for name in ("agent_id", "user_id", "session_id"))
    return _id_text(agent), _id_text(user), _id_text(chat)


_IDENT: TypeAdapter[str] = TypeAdapter(Ident)


def _id_text(value: Any) -> str:
    """An id as TurnIn reads it (stripped; bytes and the like made text), "" when it is
    no id at all: the item is then refused and its place in the order does not matter."""
    if isinstance(value, str):
        return value.strip()  # the common case, without a validator's cost
    try:
        return _IDENT.validate_python(value)
    except ValidationError:
        return ""


def _stamped(item: Mapping[str, Any] | TurnIn) -> bool:
    """Whether an item, valid or not, names a timestamp."""
    if isinstance(item, TurnIn):
        return item.timestamp is not None
    return isinstance(item, Mapping) and item.get("timestamp") is not None


# What a database says about one row's data (not an outage: those propagate).
REFUSED_BY_DATABASE = (exc.DataError, exc.IntegrityError)


def _store_one_by_one(
    settings: Settings, good: list[tuple[int, TurnIn]], now: datetime, bad: list[dict[str, Any]]
) -> tuple[IngestResult, list[SessionKey]]:
    result, due = IngestResult(), list[SessionKey]()
    for index, turn in good:
        try:
            with write_connection(settings.storage) as conn:
                one, one_due = store_turns(conn, settings.extraction, [turn], now)
        except REFUSED_BY_DATABASE as error:
            reason = str(getattr(error, "orig", None) or error).splitlines()[0]
            log.warning("the database refused turn %d of a bulk call: %s", index, reason)
            bad.append(_rejected(index, "", f"the database refused this turn: {reason}"))
            continue
        result.accepted += one.accepted
        result.duplicates += one.duplicates
        result.turn_ids += one.turn_ids
        due += [key for key in one_due if key not in due]
    return result, due


def end_session(session: Session, key: SessionKey, now: datetime) -> bool:
    """Mark a session ended so its remaining turns are extracted now. False if unknown."""
    res = session.execute(update(ChatSession).where(*session_pk(key)).values(ended_at=now))
    return bool(rowcount(res))
