"""Alembic environment: the URL comes from the caller (``memory.migrate``), never from an ini file."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from memory.tables import metadata

config = context.config
url = config.get_main_option("sqlalchemy.url")
if not url:
    raise RuntimeError("no database URL given to Alembic; run migrations with `mnemo migrate`")

engine = create_engine(url, poolclass=pool.NullPool)
with engine.connect() as connection:
    context.configure(connection=connection, target_metadata=metadata)
    with context.begin_transaction():
        context.run_migrations()
engine.dispose()
