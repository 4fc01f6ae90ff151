"""``mnemo import-artifacts``: the command around :func:`api.artifact_import.import_all` (which ``mnemo dev``'s
start runs too)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from api.cli.database import service_settings
from api.cli.hints import DEFAULT_DATA_DIR
from api.cli.options import StackDataDir


def import_artifacts(
    source: Annotated[Path, typer.Argument(help="A data directory of mnemo before the shared artifact store.")],
    data_dir: StackDataDir = DEFAULT_DATA_DIR,
) -> None:
    """Move a data directory's task artifacts, record bodies and publications into the artifact store, once."""
    from api.artifact_import import import_all
    from memory.db import make_engine

    service = service_settings(data_dir)
    engine = make_engine(service.require_database_url(), pool_size=1)
    try:
        report = import_all(source, engine, service.artifact_root(engine))
    finally:
        engine.dispose()
    typer.echo(f"mnemo: {report.summary(source)} ({service.artifact_store})")
    for path in report.files.left:
        typer.echo(f"mnemo: not imported (its bytes do not match its name): {path}", err=True)
    if report.files.left:
        raise typer.Exit(1)
