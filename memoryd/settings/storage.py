"""Where things live: the database, the broker, the data folder."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator

from memoryd.errors import ConfigError
from memoryd.settings import checks
from memoryd.settings.part import Part

PG_TIMEOUT_MAX = 2_147_483  # seconds: 2^31 - 1 milliseconds


class StorageSettings(Part):
    data_dir: Path = Field(Path(".memoryd"), description="Embedded SQLite file and broker folder")
    database_url: str = Field("", description="SQLAlchemy URL; empty means <data_dir>/memoryd.db")
    # PostgreSQL counts these in milliseconds in an int: past PG_TIMEOUT_MAX every
    # connection would fail.
    db_statement_timeout_seconds: float = Field(
        120.0,
        ge=0,
        le=PG_TIMEOUT_MAX,
        description="PostgreSQL: a statement running longer fails (0: no limit)",
    )
    db_lock_timeout_seconds: float = Field(
        15.0,
        ge=0,
        le=PG_TIMEOUT_MAX,
        description="PostgreSQL: waiting longer for a lock fails (0: no limit)",
    )
    db_pool_size: int = Field(
        10, ge=1, description="PostgreSQL connections each process keeps open (per engine)"
    )
    db_max_overflow: int = Field(
        20, ge=0, description="PostgreSQL connections a busy process may open beyond those"
    )
    db_transaction_pooler: bool = Field(
        False,
        description="PostgreSQL is reached through a transaction-pooling PgBouncer: no "
        "prepared statements, timeouts set in each transaction, no session-level locks",
    )
    broker_url: str = Field(
        "filesystem://", description="Celery broker; filesystem:// needs no server"
    )
    result_backend: str | None = Field(
        None, description="Celery result backend URL; unset keeps no task results"
    )

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str) -> str:
        return checks.database_url(value)

    @field_validator("broker_url")
    @classmethod
    def _broker_url(cls, value: str) -> str:
        return checks.broker_url(value)

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'memoryd.db'}"

    @property
    def broker_folder(self) -> Path:
        return self.data_dir / "broker"

    def ensure_private_folder(self, folder: Path) -> Path:
        """`folder`, in the data folder, made if missing and readable by its owner only
        (it holds what users said). A data folder that cannot be made is a setting's
        mistake: one line naming it, never a traceback, nor a worker started without it."""
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise self.unusable(folder, exc) from None
        return folder

    def unusable(self, folder: Path, exc: OSError) -> ConfigError:
        """The error of a folder in the data folder that cannot be made or written."""
        reason = exc.strerror or str(exc)
        if isinstance(exc, FileExistsError | NotADirectoryError):
            reason = "a file stands where a folder should"  # not "File exists"
        return ConfigError(f"MEMORYD_DATA_DIR={self.data_dir}: cannot make {folder}: {reason}")
