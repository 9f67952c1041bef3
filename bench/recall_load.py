"""bench/recall.py's data: about 2,200 distinct memories in English and Chinese, the
questions asked of them, and a bulk load of any number of memories into either database
(one INSERT … SELECT, the postings built once afterwards)."""

from __future__ import annotations

import math

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from memoryd.models import search_index
from memoryd.models.db import get_engine
from memoryd.settings import Settings
from memoryd.text import content_hash, search_text

USERS = 10_000
HEAVY_USERS = 20
HEAVY_ROWS = 100_000  # 5,000 memories each

SUBJECTS = [
    "green tea",
    "black coffee",
    "the payment module",
    "vim",
    "Lisbon",
    "jazz",
    "peanut allergy",
    "weekly report",
    "Python typing",
    "marathon training",
    "the dentist",
    "a vegetarian diet",
    "dark mode",
    "the quarterly budget",
    "Portuguese lessons",
    "the cello",
    "night shifts",
    "hiking boots",
    "Kubernetes",
    "the wedding in June",
]
VERBS = ["Prefers", "Asked about", "Is working on", "Dislikes", "Wants reminders about"]
ZH = [
    "喜欢喝龙井茶",
    "每周三下午开项目周会",
    "住在杭州西湖附近",
    "不喜欢早上开会",
    "正在学习日语",
    "对花生过敏",
    "周末常去爬山",
    "负责支付模块重构",
    "希望回答简洁直接",
    "下个月去上海出差",
]
QUERIES = [
    "what tea does the user like",
    "coffee",
    "payment module status",
    "editor",
    "where do they live",
    "music",
    "allergy",
    "report",
    "typing",
    "running",
    "dentist appointment",
    "diet",
    "theme",
    "budget",
    "language lessons",
    "龙井",
    "周会",
    "杭州",
    "开会",
    "日语",
    "过敏",
    "爬山",
    "支付",
    "简洁",
    "出差",
    "喝什么茶",
    "项目 meeting",
    "wedding",
    "hiking",
    "kubernetes cluster",
]


DETAILS = [
    "in the morning",
    "on weekends",
    "since last spring",
    "at work",
    "with friends",
    "for the new project",
    "every Monday",
    "when travelling",
    "after dinner",
    "before meetings",
    "during the holidays",
    "at home",
    "with the family",
    "for health reasons",
    "on the train",
    "in the evening",
    "this month",
    "for the team",
    "when it rains",
    "on Fridays",
]
ZH_DETAILS = [
    "，每天早上",
    "，周末",
    "，从去年开始",
    "，在公司",
    "，和朋友一起",
    "，为了新项目",
    "，每周一",
    "，出差时",
    "，晚饭后",
    "，开会前",
    "，假期里",
    "，在家",
    "，和家人一起",
    "，为了健康",
    "，在地铁上",
    "，晚上",
    "，这个月",
    "，为了团队",
    "，下雨天",
    "，每周五",
]


def vocabulary() -> list[str]:
    """About 2,200 distinct memories, a tenth of them Chinese. Its length is kept prime to
    the user counts, so that every user holds distinct memories (up to its size)."""
    english = [f"{v} {s} {d}" for v in VERBS for s in SUBJECTS for d in DETAILS]
    words = english + [f"{z}{d}" for z in ZH for d in ZH_DETAILS]
    while math.gcd(len(words), USERS * HEAVY_USERS) != 1:
        words.pop()
    return words


# Row i of a load: user i % users, memory (i * 7919) % vocab, updated i % 90 days ago.
COLUMNS = """agent_id, user_id, category, tier, status, name, content, tags, confidence,
    weight, weight_at, archive_due_at, evidence_count, access_count, content_hash,
    search_text, search_length, vector, source_turn_ids, created_at, updated_at"""
PG_LOAD = f"""
INSERT INTO memories ({COLUMNS})
SELECT :agent, 'u' || (i % :users), 'user', CASE WHEN i % 4 = 0 THEN 'short' ELSE 'long' END,
    'active', v.content, v.content, '[]', 0.6 + (i % 40) / 100.0, 1.0,
    now() - (i % 90) * interval '1 day', now() + interval '300 days', 1, 0,
    v.hash, v.terms, v.length, v.vector, '[]', now() - (i % 90) * interval '1 day',
    now() - (i % 90) * interval '1 day'
FROM generate_series(0, :rows - 1) AS i
JOIN vocab v ON v.idx = (i::bigint * 7919) % :vocab
"""
# SQLite stores datetimes as SQLAlchemy writes them: naive UTC, six fractional digits.
_SQLITE_DAYS_AGO = "strftime('%Y-%m-%d %H:%M:%S', 'now', -(i % 90) || ' days') || '.000000'"
SQLITE_LOAD = f"""
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < :rows - 1)
INSERT INTO memories ({COLUMNS})
SELECT :agent, 'u' || (i % :users), 'user', CASE WHEN i % 4 = 0 THEN 'short' ELSE 'long' END,
    'active', v.content, v.content, '[]', 0.6 + (i % 40) / 100.0, 1.0,
    {_SQLITE_DAYS_AGO}, strftime('%Y-%m-%d %H:%M:%S', 'now', '+300 days') || '.000000',
    1, 0, v.hash, v.terms, v.length, v.vector, '[]', {_SQLITE_DAYS_AGO}, {_SQLITE_DAYS_AGO}
FROM n JOIN vocab v ON v.idx = (i * 7919) % :vocab
"""


def load(url: str, rows: int, users: int, agent: str, vectors: list[bytes] | None = None) -> None:
    """Insert `rows` memories over `users` users in one statement, their postings built
    once afterwards (far faster than the row triggers), then settle the tables."""
    words = vocabulary()
    # No statement timeout for the load: at a million memories the postings rebuild
    # alone runs past the two minutes a request may take.
    loader = Settings(database_url=url, db_statement_timeout_seconds=0)
    postgres = url.startswith("postgresql")
    with get_engine(loader.storage).begin() as conn:
        conn.execute(
            text(
                "CREATE TEMP TABLE vocab "
                "(idx int, content text, hash text, terms text, length int, vector bytea)"
            )
        )
        conn.execute(
            text("INSERT INTO vocab VALUES (:i, :c, :h, :t, :n, :v)"),
            [
                {
                    "i": i,
                    "c": w,
                    "h": content_hash(w),
                    "t": search_text(f"{w} {w}"),
                    "n": len(search_text(f"{w} {w}").split()),
                    "v": vectors[i] if vectors else None,
                }
                for i, w in enumerate(words)
            ],
        )
        with search_index.postings_deferred(conn):
            conn.execute(
                text(PG_LOAD if postgres else SQLITE_LOAD),
                {"agent": agent, "users": users, "rows": rows, "vocab": len(words)},
            )
        conn.execute(text("DROP TABLE vocab"))
    settle(loader, postgres)


def settle(settings: Settings, postgres: bool) -> None:
    """On PostgreSQL, settle the tables as a long-running store would be: statistics
    fresh, no autovacuum due on the fresh rows in the middle of the measurement. SQLite
    is left as memoryd keeps it, without statistics."""
    if not postgres:
        return
    engine = get_engine(settings.storage)
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        conn.execute(text("VACUUM (ANALYZE) memories"))
        conn.execute(text("VACUUM (ANALYZE) memory_terms"))
        # And write the load's gigabyte of dirty pages out now, not during the
        # measurement: a checkpoint spread over it would time the load's disk writes.
        try:
            conn.execute(text("CHECKPOINT"))
        except DBAPIError as exc:  # needs superuser or pg_checkpoint
            print(f"no CHECKPOINT after the load, the figures include its writes: {exc.orig}")


def drop_scope_indexes(url: str) -> None:
    """The baseline's store: no index led by the scope, so every recall reads the table."""
    with get_engine(Settings(database_url=url).storage).begin() as conn:
        for index in (
            "ix_memories_scope_status",
            "ix_memories_scope_hash",
            "ix_memories_scope_key",
        ):
            conn.execute(text(f"DROP INDEX {index}"))
