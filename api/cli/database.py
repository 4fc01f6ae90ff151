"""Where the commands that reach the database directly (``keys``, ``admin``, ``backup``, ``restore``,
``import-artifacts``) find it: MNEMO_DATABASE_URL in production, else the running ``mnemo dev`` of ``--data-dir``."""

from __future__ import annotations

from pathlib import Path

from api.cli.output import fail
from api.settings import Settings


def service_settings(data_dir: Path) -> Settings:
    """Production settings from the environment (``MNEMO_DATABASE_URL`` set), or those of the running
    ``mnemo dev`` in ``data_dir``."""
    settings = Settings()
    if settings.database_url:
        return settings
    from api.devstack.processes import StackError
    from api.devstack.stack import read_state

    try:
        state = read_state(data_dir)
    except StackError as exc:
        fail(str(exc))
    return Settings(database_url=str(state["database_url"]), temporal_address=str(state["temporal_address"]))
