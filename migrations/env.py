"""Alembic environment: the URL comes from the caller (``memory.migrate``), never from an ini file."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from api.console import models as console_models  # noqa: F401 - registers the console_sessions table on Base
from memory.models import Base
from memory.reports import sales as sales_models  # noqa: F401 - registers the sales table on Base
from memory.resources import models as resource_models  # noqa: F401 - registers the resource tables on Base
from memory.resources import run_models  # noqa: F401 - registers the run and policy tables on Base
from memory.sessions import models as session_models  # noqa: F401 - registers the session tables on Base
from memory.tasks import models as task_models  # noqa: F401 - registers the task tables on Base

config = context.config
url = config.get_main_option("sqlalchemy.url")
if not url:
    raise RuntimeError("no database URL given to Alembic; run migrations with `mnemo migrate`")

engine = create_engine(url, poolclass=pool.NullPool)
with engine.connect() as connection:
    context.configure(connection=connection, target_metadata=Base.metadata)
    with context.begin_transaction():
        context.run_migrations()
engine.dispose()
