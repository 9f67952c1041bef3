"""`memoryd demo`: the whole pipeline on the embedded default, end to end.

Migrates a fresh SQLite file, starts a real Celery worker on the filesystem broker,
enqueues the bundled sample conversation, waits for extraction, prints what was
remembered, then reads it back as a chat backend would (a recall and a context block).
Uses the configured LLM if there is one, else the offline extractor.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from memoryd.client import MemoryClient
from memoryd.models.db import dispose_engines, session_scope
from memoryd.models.migrate import upgrade
from memoryd.models.tables import ExtractionBatch, Memory, Turn, TurnStatus
from memoryd.settings import Settings, StorageSettings, masked_url

DEMO_DIR = Path(".memoryd-demo")
WAIT_SECONDS = 180.0
# What the chat backend would ask before its next reply to each sample user.
QUESTIONS = {"alice": "Where does Ali live now?", "bo": "小波喜欢喝什么茶？"}


def demo_settings(base: Settings) -> Settings:
    """Embedded everything in a fresh folder; the LLM settings are kept as configured."""
    return base.updated(
        data_dir=DEMO_DIR,
        database_url="",
        broker_url="filesystem://",
        result_backend=None,
        batch_size=8,
    )


def worker_env(settings: Settings) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        MEMORYD_DATA_DIR=str(settings.storage.data_dir.resolve()),
        MEMORYD_DATABASE_URL=f"sqlite:///{(settings.storage.data_dir / 'memoryd.db').resolve()}",
        MEMORYD_BROKER_URL="filesystem://",
        MEMORYD_BATCH_SIZE=str(settings.extraction.batch_size),
    )
    env.pop("MEMORYD_RESULT_BACKEND", None)
    return env


def start_worker(settings: Settings, log_path: Path) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        "-m",
        "memoryd",
        "worker",
        "--pool=threads",
        "--concurrency=4",
        "--loglevel=INFO",
        "--without-heartbeat",
        "--without-gossip",
        "--without-mingle",
    ]
    log = log_path.open("wb")
    return subprocess.Popen(cmd, env=worker_env(settings), stdout=log, stderr=subprocess.STDOUT)


def load_sample() -> dict[str, Any]:
    text = resources.files("memoryd").joinpath("sample/conversation.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def wait_for(settings: StorageSettings, session_id: str, worker: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        with session_scope(settings, readonly=True) as session:
            left = session.scalar(
                select(func.count()).where(
                    Turn.session_id == session_id,
                    Turn.status.in_([TurnStatus.PENDING, TurnStatus.CLAIMED]),
                )
            )
        if not left:
            return
        if worker.poll() is not None:
            raise RuntimeError(f"the worker exited with code {worker.returncode}")
        time.sleep(0.2)
    raise TimeoutError(f"session {session_id} was not extracted within {WAIT_SECONDS:.0f} s")


def print_results(settings: StorageSettings) -> None:
    with session_scope(settings, readonly=True) as session:
        memories = session.scalars(
            select(Memory).order_by(Memory.user_id, Memory.status, Memory.id)
        ).all()
        batches = session.scalars(select(ExtractionBatch).order_by(ExtractionBatch.id)).all()
        turns = session.execute(select(Turn.status, func.count()).group_by(Turn.status)).all()

    print("\nMemories")
    header = (
        f"{'id':>3}  {'user':<6} {'category':<9} {'tier':<5} {'status':<10} {'conf':>4}  content"
    )
    print(header)
    print("-" * len(header))
    for m in memories:
        note = f"  (replaced by #{m.superseded_by_id})" if m.superseded_by_id else ""
        ev = f"  [seen {m.evidence_count}x]" if m.evidence_count > 1 else ""
        print(
            f"{m.id:>3}  {m.user_id:<6} {m.category:<9} {m.tier:<5} {m.status:<10} "
            f"{m.confidence:>4.2f}  {m.content}{note}{ev}"
        )

    print("\nExtraction batches")
    header = (
        f"{'id':>3}  {'session':<13} {'turns':>5} {'status':<6} {'extractor':<9} "
        f"{'proposed':>8} {'accepted':>8}  rejected"
    )
    print(header)
    print("-" * len(header))
    for b in batches:
        print(
            f"{b.id:>3}  {b.session_id:<13} {b.turn_count:>5} {b.status:<6} "
            f"{b.extractor or '-':<9} {b.facts_proposed:>8} {b.facts_accepted:>8}  "
            f"{json.dumps(b.rejections or {})}"
        )
    print("\nTurns by status: " + ", ".join(f"{s}={n}" for s, n in turns))


def run_demo(base: Settings) -> int:
    settings = demo_settings(base)
    shutil.rmtree(DEMO_DIR, ignore_errors=True)
    DEMO_DIR.mkdir(parents=True)
    upgrade(settings)
    dispose_engines()
    _say_what_extracts(settings)
    worker = start_worker(settings, DEMO_DIR / "worker.log")
    try:
        _chat(settings, worker)
    except (TimeoutError, RuntimeError) as exc:
        print(f"demo failed: {exc}; worker log: {DEMO_DIR / 'worker.log'}", file=sys.stderr)
        return 1
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()
    print_results(settings.storage)
    print_read_side(settings)
    if not settings.llm.llm_configured:
        print(
            "\nAll memories above were produced by the offline extractor "
            "(metadata extractor=offline)."
        )
    return 0


def print_read_side(settings: Settings) -> None:
    """What the chat backend reads before its next reply: the ranked memories, and the
    block it puts in the system prompt."""
    agent = load_sample()["agent_id"]
    client = MemoryClient(settings, dispatch=False)
    for user, question in QUESTIONS.items():
        print(f"\nrecall({question!r}) for {user}")
        for hit in client.recall(question, agent, user, k=3):
            print(f"  {hit.score:.2f}  {hit.content}")
        print(f"build_context({question!r}) for {user}")
        print(client.build_context(question, agent, user, token_budget=200) or "  (nothing fits)")


def _say_what_extracts(settings: Settings) -> None:
    if settings.llm.llm_configured:
        where = masked_url(settings.llm.llm_base_url or "") or "OpenAI"
        model = settings.llm.extraction_model
        print(f"memoryd demo: extracting with the LLM at {where} (model {model})")
    else:
        print(
            "memoryd demo: no LLM configured (set OPENAI_API_KEY or MEMORYD_LLM_BASE_URL); "
            "using the OFFLINE rule-based extractor, which only catches explicit statements"
        )
    database = masked_url(settings.storage.resolved_database_url)
    print(f"database: {database}   broker: filesystem ({DEMO_DIR}/broker)")


def _chat(settings: Settings, worker: subprocess.Popen[bytes]) -> None:
    """The sample conversations, a session at a time, each waited for until extracted."""
    client = MemoryClient(settings)
    sample = load_sample()
    for conv in sample["sessions"]:
        turns = [
            {
                "agent_id": sample["agent_id"],
                "user_id": conv["user_id"],
                "session_id": conv["session_id"],
                "role": role,
                "content": content,
                "turn_key": f"{conv['session_id']}-{i}",
            }
            for i, (role, content) in enumerate(conv["turns"])
        ]
        result = client.enqueue_turns(turns)
        client.end_session(sample["agent_id"], conv["user_id"], conv["session_id"])
        print(
            f"enqueued {result.accepted} turns of {conv['user_id']}/{conv['session_id']}; "
            "waiting for the worker …"
        )
        wait_for(settings.storage, conv["session_id"], worker)
