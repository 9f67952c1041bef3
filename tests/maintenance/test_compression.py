"""Session compression with the fake LLM: segments, synopsis, incremental runs, faults."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pytest
from sqlalchemy import select, text, update
from sqlalchemy.orm import Session

from memoryd.client import MemoryClient
from memoryd.errors import BatchFailed
from memoryd.extraction.batch import extract_session
from memoryd.ingest.sweeper import retry_failed
from memoryd.maintenance import compression
from memoryd.maintenance.compression import (
    compress_due_sessions,
    compress_session,
    compression_candidates,
)
from memoryd.maintenance.summarizers import Summary, get_summarizer
from memoryd.models.coordination import database_time
from memoryd.models.db import session_scope, utcnow
from memoryd.models.keys import SessionKey, session_pk
from memoryd.models.tables import ChatSession, ExtractionBatch, FailureKind, SessionSegment
from memoryd.settings import Settings
from testkit import fakellm
from testkit.fakellm import FakeLLM
from tests.conftest import with_llm

KEY = SessionKey("bot", "ann", "long")


def chat(
    settings: Settings, start: int, count: int, session: str = "long", said: str = "turn"
) -> None:
    """Turns said and extracted (offline): a session is due for compression once a batch
    that takes it past the trigger finishes."""
    client = MemoryClient(settings, dispatch=False)
    client.enqueue_turns(
        [
            {
                "agent_id": "bot",
                "user_id": "ann",
                "session_id": session,
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"{said} {i} " + "word " * 20,
            }
            for i in range(start, start + count)
        ]
    )
    client.end_session("bot", "ann", session)
    offline = settings.updated(**{"offline_extractor": True})
    while extract_session(offline, SessionKey("bot", "ann", session)).more_pending:
        pass


def compress_settings(settings: Settings, llm: FakeLLM) -> Settings:
    # 25 estimated tokens a turn: 30 turns (750) pass a 600-token trigger.
    return with_llm(settings, llm, compress_trigger_tokens=600, keep_recent_turns=6)


def segments(db: Session) -> list[tuple[int, int, int]]:
    rows = [
        (s.first_turn_id, s.last_turn_id, s.turn_count)
        for s in db.scalars(select(SessionSegment).order_by(SessionSegment.id))
    ]
    db.commit()
    return rows


def chat_row(db: Session) -> ChatSession:
    row = db.scalars(select(ChatSession)).one()
    db.refresh(row)
    db.commit()
    return row


def test_segments_then_synopsis_keeping_recent_turns(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = compress_settings(settings, fake_llm)
    chat(s, 0, 30)
    assert compress_due_sessions(s) == {"due": 1, "compressed": 1}
    # 24 older turns in segments of ten; the 6 newest stay verbatim.
    assert segments(db) == [(1, 10, 10), (11, 20, 10), (21, 24, 4)]
    row = chat_row(db)
    assert row.summary_upto == 24
    assert row.summary is not None and row.summary.count("user turns]") == 3
    assert fake_llm.calls == 4  # three segments, one synopsis
    context = MemoryClient(s).session_context("bot", "ann", "long", token_budget=10_000)
    assert context.summary == row.summary
    assert [t.content.split()[1] for t in context.recent_turns] == [str(i) for i in range(24, 30)]
    assert "<session-summary>" in context.as_text()


def test_second_run_summarises_only_what_is_new(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = compress_settings(settings, fake_llm)
    chat(s, 0, 30)
    compress_due_sessions(s)
    first = chat_row(db).summary
    assert compress_due_sessions(s) == {"due": 0, "compressed": 0}  # nothing new
    calls = fake_llm.calls
    chat(s, 30, 30)
    assert compress_due_sessions(s)["compressed"] == 1
    assert segments(db)[3:] == [(25, 34, 10), (35, 44, 10), (45, 54, 10)]
    assert fake_llm.calls - calls == 4  # only the new turns, then the synopsis
    synopsis_prompt = fake_llm.requests[-1]["messages"][1]["content"]
    assert first is not None and first in synopsis_prompt  # built on the previous synopsis
    assert chat_row(db).summary_upto == 54


def test_a_summary_with_control_characters_is_kept_without_them(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = compress_settings(settings, fake_llm)
    chat(s, 0, 30)
    segment = fakellm.answer({"summary": "Talked\x00 about\ud800 turns\x07"})
    fake_llm.push(segment, segment, segment, fakellm.answer({"synopsis": "All\x1b fine\x00"}))
    assert compress_due_sessions(s) == {"due": 1, "compressed": 1}
    assert chat_row(db).summary == "All fine"
    stored = [seg.summary for seg in db.scalars(select(SessionSegment))]
    assert stored == ["Talked about\ufffd turns"] * 3


def test_budget_keeps_the_newest_turns(settings: Settings, db: Session, fake_llm: FakeLLM) -> None:
    s = compress_settings(settings, fake_llm)
    chat(s, 0, 30)
    compress_due_sessions(s)
    context = MemoryClient(s).session_context("bot", "ann", "long", token_budget=120)
    assert context.tokens <= 120
    assert context.recent_turns and context.recent_turns[-1].content.startswith("turn 29 ")
    tiny = MemoryClient(s).session_context("bot", "ann", "long", token_budget=5)
    assert tiny.tokens <= 5 and tiny.recent_turns == []


def test_llm_fault_is_retried_then_dead_lettered(
    settings: Settings, db: Session, fake_llm: FakeLLM
) -> None:
    s = compress_settings(settings, fake_llm)
    s = s.updated(**{"max_attempts": 2, "llm_retries": 1})
    chat(s, 0, 30)
    fake_llm.push(fakellm.server_error())  # one transient fault: retried inside the call
    assert compress_session(s, KEY)
    assert fake_llm.calls == 5

    chat(s, 30, 30)
    fake_llm.push(*[fakellm.server_error()] * 6)  # an outage: never counts an attempt
    for _ in range(3):
        assert not compress_session(s, KEY)
    assert chat_row(db).compress_attempts == 0
    kinds = db.scalars(select(ExtractionBatch.error_kind).where(ExtractionBatch.status == "failed"))
    assert set(kinds) == {FailureKind.TRANSIENT}
    db.commit()
    assert compress_session(s, KEY)

    chat(s, 60, 30)
    fake_llm.push(*[fakellm.bad_request()] * 2)
    assert not compress_session(s, KEY)
    assert not compress_session(s, KEY)
    row = chat_row(db)
    assert row.compress_attempts == 2 and "400" in (row.compress_error or "")
    assert compress_due_sessions(s) == {"due": 0, "compressed": 0}  # dead-lettered
    failed = db.scalars(
        select(ExtractionBatch).where(ExtractionBatch.error_kind == FailureKind.PERMANENT)
    ).all()
    assert [b.kind for b in failed] == ["compress", "compress"]
    db.commit()
    retry_failed(db, utcnow())
    db.commit()
    assert compress_due_sessions(s) == {"due": 1, "compressed": 1}


def test_offline_summaries_without_an_llm(settings: Settings, db: Session) -> None:
    s = settings.updated(**{"compress_trigger_tokens": 600, "keep_recent_turns": 6})
    chat(s, 0, 30)
    assert compress_due_sessions(s)["compressed"] == 1
    row = chat_row(db)
    assert row.summary is not None and row.summary.startswith("User said: turn 0")


class OvertakenSummarizer:
    """Offline summaries, but while the first segment is summarised the run's lease runs
    out and a second run compresses the same turns to completion."""

    uses_llm = False

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.inner = get_summarizer(settings)
        self.overtaken = False

    def segment(self, turns: Sequence[tuple[str, str]]) -> Summary:
        if not self.overtaken:
            self.overtaken = True
            with session_scope(self.settings.storage) as session:
                past = database_time(session) - timedelta(seconds=1)
                session.execute(
                    update(ChatSession).where(*session_pk(KEY)).values(compress_lease_until=past)
                )
            assert compress_session(self.settings, KEY, self.inner)
        return self.inner.segment(turns)

    def synopsis(self, previous: str, segments: Sequence[str]) -> Summary:
        return self.inner.synopsis(previous, segments)


def test_a_run_that_outlived_its_lease_writes_nothing(settings: Settings, db: Session) -> None:
    s = settings.updated(**{"compress_trigger_tokens": 600, "keep_recent_turns": 6})
    chat(s, 0, 30)
    assert not compress_session(s, KEY, OvertakenSummarizer(s))
    assert segments(db) == [(1, 10, 10), (11, 20, 10), (21, 24, 4)]  # once, by the second run
    row = chat_row(db)
    assert row.summary_upto == 24 and row.compress_attempts == 0
    runs = select(ExtractionBatch.status).where(ExtractionBatch.kind == "compress")
    assert db.scalars(runs.order_by(ExtractionBatch.id)).all() == ["abandoned", "done"]


class PoisonSummarizer:
    """Offline summaries, except that one session's turns crash it (a bug)."""

    uses_llm = False

    def __init__(self, settings: Settings) -> None:
        self.inner = get_summarizer(settings)

    def segment(self, turns: Sequence[tuple[str, str]]) -> Summary:
        if any("poison" in content for _role, content in turns):
            raise KeyError("poison")
        return self.inner.segment(turns)

    def synopsis(self, previous: str, segments: Sequence[str]) -> Summary:
        return self.inner.synopsis(previous, segments)


def test_a_poison_session_fails_alone_and_the_run_still_shows_failure(
    settings: Settings, db: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryd.maintenance import compression

    s = settings.updated(**{"compress_trigger_tokens": 600, "keep_recent_turns": 6})
    chat(s, 0, 30, session="a")
    chat(s, 0, 30, session="b", said="poison")
    chat(s, 0, 30, session="c")
    monkeypatch.setattr(compression, "get_summarizer", PoisonSummarizer)
    with pytest.raises(BatchFailed, match="1 of 3 sessions"):
        compress_due_sessions(s)
    rows = {r.session_id: r for r in db.scalars(select(ChatSession))}
    db.commit()
    assert rows["a"].summary and rows["c"].summary  # the others were compressed
    poisoned = rows["b"]
    assert poisoned.summary is None and poisoned.compress_attempts == 1
    assert poisoned.compress_lease_until is None  # freed at once, not after lease_seconds
    assert "KeyError" in (poisoned.compress_error or "")


def due(db: Session) -> dict[str, bool]:
    rows = db.execute(select(ChatSession.session_id, ChatSession.compress_due)).all()
    db.commit()
    return {name: flag for name, flag in rows}


def test_a_session_is_due_once_a_finished_batch_takes_it_past_the_trigger(
    settings: Settings, db: Session
) -> None:
    s = settings.updated(**{"compress_trigger_tokens": 600, "keep_recent_turns": 6})
    chat(s, 0, 20)  # 500 tokens: not yet
    MemoryClient(s, dispatch=False).enqueue_turns(
        [
            {
                "agent_id": "bot",
                "user_id": "ann",
                "session_id": "long",
                "role": "user",
                "content": "turn 20 " + "word " * 200,
            }
        ]
    )
    assert due(db) == {"long": False}  # said, not yet extracted
    chat(s, 21, 1)
    assert due(db) == {"long": True}
    assert compress_due_sessions(s) == {"due": 1, "compressed": 1}
    assert due(db) == {"long": False}  # the 6 recent turns left are under the trigger
    assert compress_due_sessions(s) == {"due": 0, "compressed": 0}


def test_raising_the_trigger_clears_a_due_session(settings: Settings, db: Session) -> None:
    s = settings.updated(**{"compress_trigger_tokens": 600, "keep_recent_turns": 6})
    chat(s, 0, 30)
    raised = s.updated(**{"compress_trigger_tokens": 5000})
    assert compress_due_sessions(raised) == {"due": 1, "compressed": 0}
    assert due(db) == {"long": False} and not segments(db)


def test_due_sessions_are_read_through_their_index(settings: Settings, db: Session) -> None:
    """The candidate query reads the partial index of due sessions, never every session
    or turn: its cost follows the sessions to compress."""
    query = compression_candidates(settings.extraction, utcnow())
    sql = str(query.compile(db.get_bind(), compile_kwargs={"literal_binds": True}))
    if db.get_bind().dialect.name == "sqlite":
        plan = " ".join(str(r) for r in db.execute(text(f"EXPLAIN QUERY PLAN {sql}")))
        assert "USING INDEX ix_sessions_compress_due" in plan, plan
    else:
        db.execute(text("SET LOCAL enable_seqscan = off"))  # an empty table: force the choice
        plan = " ".join(r[0] for r in db.execute(text(f"EXPLAIN {sql}")))
        assert "ix_sessions_compress_due" in plan, plan
    db.rollback()


def test_a_claim_over_a_summary_that_moved_meanwhile_takes_no_lease(
    settings: Settings, db: Session
) -> None:
    """A run that read the session before another one finished (and freed the lease)
    must not summarise the same turns again."""
    s = settings.updated(**{"compress_trigger_tokens": 600, "keep_recent_turns": 6})
    chat(s, 0, 30)
    with session_scope(s.storage) as session:
        stale = session.scalars(select(ChatSession)).one()
        read_upto = stale.summary_upto  # as this run read it: nothing summarised yet
    assert compress_due_sessions(s)["compressed"] == 1  # another run, to the end
    with session_scope(s.storage) as session:
        now = database_time(session)
        assert not compression._take_lease(session, s.extraction, KEY, 999, read_upto, now)
        assert compression._take_lease(
            session, s.extraction, KEY, 999, chat_row(db).summary_upto, now
        )
