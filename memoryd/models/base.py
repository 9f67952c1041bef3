"""The declarative base, column types and enums every table shares."""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Integer,
    MetaData,
    String,
    and_,
    bindparam,
    literal_column,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeDecorator

# SQLite only auto-increments INTEGER PRIMARY KEY; PostgreSQL gets a bigint identity.
BigId = BigInteger().with_variant(Integer(), "sqlite")

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

SHARED_USER = "*"  # user_id of an agent's shared workspace scope, readable by all its users


def written_in(value: str) -> ColumnElement[str]:
    """`value`, a constant of the code's own (a status, a tier, ""), written into the
    statement's text instead of sent as a parameter: a status compared with it lets a
    prepared statement's generic plan still read the partial index of that status
    (PostgreSQL cannot prove the index's predicate from a `$1`). A quoted literal, so
    the statement compiles once (a literal bound parameter is rendered at each run)."""
    if "'" in value or "\\" in value:
        raise ValueError(f"not a constant to write in a statement: {value!r}")
    return literal_column(f"'{value}'", String)


def written_limit(rows: int) -> ColumnElement[int]:
    """A LIMIT of the code's own written into the statement's text: a prepared
    statement's generic plan takes a `LIMIT $1` for a tenth of what it filters, and
    then walked the table's primary key backward, past every row of other users, to
    fill a read of a user's few newest rows (tests/recall/test_plans.py)."""
    return literal_column(str(int(rows)), Integer)


class ScopeLike(Protocol):
    """Whose rows: models.keys.Scope, a SessionKey, or anything naming agent and user."""

    @property
    def agent_id(self) -> str: ...

    @property
    def user_id(self) -> str: ...


def scope_params(scope: ScopeLike) -> dict[str, str]:
    """The values of Scoped.of_bound's parameters."""
    return {"agent_id": scope.agent_id, "user_id": scope.user_id}


def readable_users(scope: ScopeLike) -> list[str]:
    """The user ids whose memories a scope reads: its own and the agent's shared `*`."""
    return [scope.user_id] if scope.user_id == SHARED_USER else [scope.user_id, SHARED_USER]


class Scoped:
    """A table whose rows belong to one scope (agent_id, user_id). Queries name a scope's
    rows only through these two conditions, so which rows a scope owns, and which it may
    read, are written once per table rather than remembered at every query."""

    if TYPE_CHECKING:
        agent_id: Mapped[str]
        user_id: Mapped[str]

    @classmethod
    def of(cls, scope: ScopeLike) -> ColumnElement[bool]:
        """The scope's own rows: what it writes, erases and counts."""
        return and_(cls.agent_id == scope.agent_id, cls.user_id == scope.user_id)

    @classmethod
    def of_bound(cls) -> ColumnElement[bool]:
        """`of` with the scope given at execution, as {"agent_id": …, "user_id": …}:
        for a statement built once and run often (scope_params gives the values)."""
        return and_(cls.agent_id == bindparam("agent_id"), cls.user_id == bindparam("user_id"))

    @classmethod
    def readable_by(cls, scope: ScopeLike) -> ColumnElement[bool]:
        """The rows the scope may read: its own and its agent's shared `*` scope's. A read
        by id checks each row against readable_users instead."""
        return and_(cls.agent_id == scope.agent_id, cls.user_id.in_(readable_users(scope)))

    @classmethod
    def matching(cls, agent_id: str | None, user_id: str | None) -> list[ColumnElement[bool]]:
        """The rows of every scope with that agent and that user, either left open (an
        export of one agent, of one user id across agents, or of everything)."""
        where = []
        if agent_id:
            where.append(cls.agent_id == agent_id)
        if user_id:
            where.append(cls.user_id == user_id)
        return where


def require_aware(value: datetime) -> datetime:
    """`value`, refused if naive: memoryd stores and compares UTC-aware datetimes only."""
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value!r}: memoryd stores UTC-aware datetimes")
    return value


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite stores them naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        require_aware(value)
        if dialect.name == "sqlite":
            return value.astimezone(UTC).replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {
        datetime: UTCDateTime(),
        dict[str, Any]: JSON(),
        list[str]: JSON(),
        list[int]: JSON(),
        list[float]: JSON(),
    }


class TurnStatus(enum.StrEnum):
    PENDING = "pending"
    CLAIMED = "claimed"
    DONE = "done"
    FAILED = "failed"  # dead-lettered: kept, re-drivable (sweeper.retry_failed)
    SKIPPED = "skipped"  # a dead letter given up on: kept as history, never extracted


class Tier(enum.StrEnum):
    SHORT = "short"
    LONG = "long"


class MemoryStatus(enum.StrEnum):
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    ARCHIVED = "archived"
    EXPIRED = "expired"
    DELETED = "deleted"


class Category(enum.StrEnum):
    USER = "user"
    PROJECT = "project"
    FEEDBACK = "feedback"
    REFERENCE = "reference"
    EPISODE = "episode"
    PROCEDURE = "procedure"
    EXPERIENCE = "experience"  # a problem solved: pain → solution → outcome (seed 002)


class EventKind(enum.StrEnum):
    CREATED = "created"
    CONFIRMED = "confirmed"
    UPDATED = "updated"
    SUPERSEDED = "superseded"
    PROMOTED = "promoted"
    EXPIRED = "expired"
    ARCHIVED = "archived"
    RESTORED = "restored"
    DELETED = "deleted"


class Actor(enum.StrEnum):
    EXTRACTOR = "extractor"
    MAINTENANCE = "maintenance"
    API = "api"


class FailureKind(enum.StrEnum):
    TRANSIENT = "transient"
    PERMANENT = "permanent"
    BUG = "bug"


class BatchStatus(enum.StrEnum):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    ABANDONED = "abandoned"  # its lease expired or was taken over
