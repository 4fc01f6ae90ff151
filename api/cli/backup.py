"""``mnemo backup`` and ``mnemo restore``: the options and messages around :mod:`api.backup`, which does the work
(and which the tests call directly)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from api.cli.database import service_settings
from api.cli.hints import DEFAULT_DATA_DIR
from api.cli.options import StackDataDir
from api.cli.output import fail


def backup(
    out: Annotated[Path, typer.Option("--out", help="Archive to write (pg_dump custom format).")],
    data_dir: StackDataDir = DEFAULT_DATA_DIR,
) -> None:
    """Back up the database (MNEMO_DATABASE_URL, or the running `mnemo dev`)."""
    from api.backup import BackupError
    from api.backup import backup as run_backup

    try:
        run_backup(service_settings(data_dir).require_database_url(), out)
    except BackupError as exc:
        fail(str(exc))
    typer.echo(f"mnemo: backup written to {out}")


def restore(
    archive: Annotated[Path, typer.Argument(help="An archive written by `mnemo backup`.")],
    data_dir: StackDataDir = DEFAULT_DATA_DIR,
) -> None:
    """Restore a backup; tombstones of deletions made since are re-applied before it goes live."""
    from api.backup import BackupError
    from api.backup import restore as run_restore

    try:
        service = service_settings(data_dir)
        report = run_restore(service.require_database_url(), archive, service)
    except BackupError as exc:
        fail(str(exc))
    typer.echo(
        f"mnemo: restored {archive}; re-applied {report.tombstones} tombstone(s) in {report.tenants} tenant(s), "
        f"scrubbing {report.rows_scrubbed} row(s)"
    )
