"""The ORM models and the Alembic migrations describe the same tables and columns."""

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine

from api.devstack.postgres import PostgresInfo
from memory.models import Base
from memory.tasks import models as task_models  # noqa: F401 - registers the task tables on Base
from migrations import alembic_config

# Indexes, RLS policies and partial unique constraints live only in the migrations.
STRUCTURAL = {"add_table", "remove_table", "add_column", "remove_column"}
COLUMN_CHANGES = {"modify_type", "modify_nullable"}


def _differences(url: str) -> list[object]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            diffs = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    finally:
        engine.dispose()
    found: list[object] = []
    for diff in diffs:
        # Column modifications come grouped in a list; everything else is a tuple whose first item is the op.
        ops = diff if isinstance(diff, list) else [diff]
        found += [op for op in ops if op[0] in STRUCTURAL | COLUMN_CHANGES]
    return found


def test_models_match_the_migrated_schema(postgres: PostgresInfo) -> None:
    assert _differences(postgres.url()) == []


def test_database_is_at_the_single_head(postgres: PostgresInfo) -> None:
    config = alembic_config(postgres.url())
    heads = ScriptDirectory.from_config(config).get_heads()
    engine = create_engine(postgres.url())
    with engine.connect() as connection:
        current = MigrationContext.configure(connection).get_current_heads()
    engine.dispose()
    assert len(heads) == 1
    assert current == tuple(heads)
