"""Alembic environment: runs on the engine memoryd itself uses."""

from alembic import context

from memoryd.models.db import get_engine
from memoryd.models.tables import Base
from memoryd.settings import Settings

# Search structures the ORM does not model (SQLite FTS5 tables; see models/search_index).
UNMODELLED_PREFIXES = (
    "memories_fts",
    "memories_trgm",
    "ix_memories_search",
    "ix_memories_trgm",
    "ix_memories_scope_trgm",
)


def include_object(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    return not (reflected and name is not None and name.startswith(UNMODELLED_PREFIXES))


config = context.config
settings = config.attributes.get("settings") or Settings()
engine = get_engine(settings.storage)

with engine.connect() as connection:
    if connection.dialect.name == "postgresql":
        # A migration may rewrite a large table and wait for workers' locks: no limits
        # for its own transaction.
        connection.exec_driver_sql("SET LOCAL statement_timeout = 0")
        connection.exec_driver_sql("SET LOCAL lock_timeout = 0")
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_object=include_object,
    )
    with context.begin_transaction():
        context.run_migrations()
    connection.commit()
