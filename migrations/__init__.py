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
    """Bring the schema at ``url`` to ``revision``; a no-op when it is already there."""
    command.upgrade(alembic_config(url), revision)
