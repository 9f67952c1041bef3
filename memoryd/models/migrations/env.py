"""Alembic environment: runs on the engine memoryd itself uses."""

from alembic import context

from memoryd.db import get_engine
from memoryd.models.tables import Base
from memoryd.settings import Settings

config = context.config
settings = config.attributes.get("settings") or Settings()
engine = get_engine(settings)

with engine.connect() as connection:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()
    connection.commit()
