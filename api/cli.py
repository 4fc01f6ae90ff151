"""The ``mnemo`` command line: the embedded dev stack, production services and admin commands."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from api.mcp.cli import mcp_app
from api.policy_cli import policy_app
from api.session_cli import session_app
from api.settings import Settings
from api.task_cli import task_app

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from memory.keys import KeyInfo

app = typer.Typer(help="mnemo: governed memory and durable tasks for AI agents.", no_args_is_help=True)
keys_app = typer.Typer(help="API keys.", no_args_is_help=True)
app.add_typer(keys_app, name="keys")
admin_app = typer.Typer(help="Operator commands.", no_args_is_help=True)
app.add_typer(admin_app, name="admin")
app.add_typer(task_app, name="task")
app.add_typer(session_app, name="session")
app.add_typer(mcp_app, name="mcp")
app.add_typer(policy_app, name="policy")

DataDir = Annotated[
    Path, typer.Option("--data-dir", envvar="MNEMO_DATA_DIR", help="Data directory of the embedded stack.")
]


def fail(message: str) -> None:
    typer.echo(f"mnemo: {message}", err=True)
    raise typer.Exit(1)


@app.command()
def dev(
    data_dir: DataDir = Path(".mnemo"),
    port: Annotated[int, typer.Option(help="API port on 127.0.0.1.")] = 8000,
    temporal_port: Annotated[int, typer.Option(help="Temporal frontend port on 127.0.0.1.")] = 7233,
    temporal_ui_port: Annotated[
        int | None,
        typer.Option(envvar="MNEMO_DEV_TEMPORAL_UI_PORT", help="Temporal UI port (default: --temporal-port + 1000)."),
    ] = None,
    demo: Annotated[
        bool, typer.Option(help="Load the demo's sales data (ready waits for it), then write and recall a demo memory.")
    ] = True,
) -> None:
    """Run the whole stack locally: embedded PostgreSQL, Temporal dev server, worker and API, restarted if they
    crash."""
    from api.demo import run_demo
    from api.devstack.stack import DevOptions, run_dev
    from api.devstack.supervisor import RestartPolicy

    settings = Settings()
    restart = RestartPolicy(limit=settings.dev_restart_limit, window=settings.dev_restart_window_seconds)
    options = DevOptions(data_dir=data_dir, port=port, temporal_port=temporal_port, demo=demo, restart=restart,
                         ui_port=temporal_ui_port)
    raise typer.Exit(run_dev(options, run_demo if demo else None))


@app.command()
def migrate() -> None:
    """Apply database migrations to MNEMO_DATABASE_URL."""
    from migrations import upgrade

    upgrade(Settings().require_database_url())
    typer.echo("mnemo: database schema is up to date")


@app.command()
def worker(
    metrics_port: Annotated[
        int | None, typer.Option(help="Serve /metrics (mnemo's and the Temporal SDK's) on this port.")
    ] = None,
) -> None:
    """Run the Temporal worker against MNEMO_DATABASE_URL and MNEMO_TEMPORAL_ADDRESS."""
    from api.observability.logging import configure_logging
    from api.observability.tracing import configure_tracing
    from api.worker import run_worker

    settings = Settings()
    if metrics_port is not None:
        settings = settings.model_copy(update={"worker_metrics_port": metrics_port})
    settings.require_database_url()
    configure_logging(settings.log_level)
    configure_tracing("mnemo-worker")

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await run_worker(settings, stop)

    asyncio.run(main())
    # The worker has shut down cleanly. Skip interpreter finalisation: the SDK's native threads
    # can still call into Python while it runs and abort the process (PyGILState_Release).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@app.command()
def api() -> None:
    """Serve the HTTP API (uvicorn) on MNEMO_API_HOST:MNEMO_API_PORT."""
    import uvicorn

    from api.httpserver import BoundedHttpToolsProtocol
    from api.main import create_app
    from api.observability.logging import configure_logging
    from api.observability.tracing import configure_tracing

    settings = Settings()
    settings.require_database_url()
    configure_logging(settings.log_level)
    configure_tracing("mnemo-api")
    uvicorn.run(
        lambda: create_app(settings),
        factory=True,
        host=settings.api_host,
        port=settings.api_port,
        log_level=settings.log_level,
        http=BoundedHttpToolsProtocol,  # httptools with a bounded request head (431)
        log_config=None,  # the JSON lines of api.observability.logging
    )


def _cli_actor() -> str:
    """Who the audit log names for a key changed from the command line: the operating-system user."""
    import getpass

    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return f"cli:uid-{os.getuid()}"


@contextmanager
def _keys_session(data_dir: Path) -> Iterator[Session]:
    """A transaction on the database of MNEMO_DATABASE_URL or the running ``mnemo dev`` (keys are global rows)."""
    from memory.db import global_session, make_engine

    engine = make_engine(_service_settings(data_dir).require_database_url(), pool_size=1)
    try:
        with global_session(engine) as session:
            yield session
    finally:
        engine.dispose()


def _duration(raw: str | None, what: str) -> timedelta | None:
    """A duration option (90d, 12h, 1h30m), or a one-line error."""
    from memory.errors import MnemoError
    from memory.keys import parse_duration

    if raw is None:
        return None
    try:
        return parse_duration(raw, what)
    except MnemoError as exc:
        fail(exc.message)
        raise


ExpiresIn = Annotated[
    str | None, typer.Option("--expires-in", help="Lifetime, e.g. 90d, 12h, 1h30m (default: until revoked).")
]


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option(help="Tenant id (created if it does not exist).")],
    user: Annotated[str, typer.Option(help="User id the key authenticates as.")],
    roles: Annotated[str, typer.Option(help="Comma-separated roles, e.g. memory_writer,approver.")] = "",
    agent: Annotated[str | None, typer.Option(help="Bind the key to an agent (for AGENT space memories).")] = None,
    expires_in: ExpiresIn = None,
    data_dir: DataDir = Path(".mnemo"),
) -> None:
    """Create an API key and print it, alone, on stdout. It is shown this once."""
    from memory.auth import create_api_key
    from memory.db import make_engine, tenant_session
    from memory.errors import MnemoError

    lifetime = _duration(expires_in, "--expires-in")
    url = _service_settings(data_dir).require_database_url()
    engine = make_engine(url, pool_size=1)
    try:
        with tenant_session(engine, tenant) as session:
            key = create_api_key(
                session, tenant_id=tenant, user_id=user, agent_id=agent, roles=roles.split(",") if roles else [],
                expires_in=lifetime, actor=_cli_actor(),
            )
    except MnemoError as exc:
        fail(exc.message)
    finally:
        engine.dispose()
    sys.stdout.write(key + "\n")


def _key_json(info: KeyInfo) -> dict[str, object]:
    from dataclasses import asdict
    from datetime import datetime

    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in asdict(info).items()}


@keys_app.command("list")
def keys_list(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's keys.")] = None,
    user: Annotated[str | None, typer.Option(help="Only this user's keys.")] = None,
    all_keys: Annotated[bool, typer.Option("--all", help="Include revoked and expired keys.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON array, for scripts.")] = False,
    data_dir: DataDir = Path(".mnemo"),
) -> None:
    """List API keys (ids, identities, roles, state and instants; never a secret)."""
    import json

    from memory.keys import list_keys

    with _keys_session(data_dir) as session:
        found = list_keys(session, tenant_id=tenant, user_id=user, include_inactive=all_keys)
    if as_json:
        typer.echo(json.dumps([_key_json(info) for info in found], indent=2))
        return
    if not found:
        typer.echo("mnemo: no keys" + ("" if all_keys else " in use (--all shows revoked and expired ones)"), err=True)
        return
    rows = [("KEY ID", "TENANT", "USER", "AGENT", "ROLES", "STATE", "CREATED", "EXPIRES", "REVOKED")]
    for info in found:
        rows.append((
            info.key_id, info.tenant_id, info.user_id, info.agent_id or "-", ",".join(info.roles) or "-", info.state,
            f"{info.created_at:%Y-%m-%d %H:%M}", f"{info.expires_at:%Y-%m-%d %H:%M}" if info.expires_at else "-",
            f"{info.revoked_at:%Y-%m-%d %H:%M}" if info.revoked_at else "-",
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


@keys_app.command("revoke")
def keys_revoke(
    key: Annotated[str, typer.Argument(help="The key id (or the whole key, e.g. a leaked one).")],
    reason: Annotated[str | None, typer.Option(help="Why, for the audit log.")] = None,
    data_dir: DataDir = Path(".mnemo"),
) -> None:
    """Revoke a key at once (audited). Revoking a revoked key changes nothing."""
    from memory.errors import MnemoError
    from memory.keys import key_id_of, revoke_key

    try:
        with _keys_session(data_dir) as session:
            info = revoke_key(session, key_id_of(key), actor=_cli_actor(), reason=reason)
    except MnemoError as exc:
        fail(exc.message)
        raise
    typer.echo(f"mnemo: key {info.key_id} of {info.tenant_id}/{info.user_id} is revoked")


@keys_app.command("rotate")
def keys_rotate(
    key: Annotated[str, typer.Argument(help="The key id (or the whole key) to replace.")],
    grace: Annotated[
        str | None, typer.Option(help="Keep the old key working this long, e.g. 1h (default: none).")
    ] = None,
    expires_in: ExpiresIn = None,
    data_dir: DataDir = Path(".mnemo"),
) -> None:
    """Print a new key (alone, on stdout, once) with the old one's identity and roles; revoke the old one."""
    from memory.errors import MnemoError
    from memory.keys import key_id_of, rotate_key

    period = _duration(grace, "--grace") or timedelta(0)
    lifetime = _duration(expires_in, "--expires-in")
    try:
        with _keys_session(data_dir) as session:
            old_id = key_id_of(key)
            secret, info = rotate_key(session, old_id, actor=_cli_actor(), grace=period, expires_in=lifetime)
    except MnemoError as exc:
        fail(exc.message)
        raise
    when = "now" if not period else f"in {period}"
    typer.echo(
        f"mnemo: key {info.key_id} replaces {old_id} ({info.tenant_id}/{info.user_id}); {old_id} stops working {when}",
        err=True,
    )
    sys.stdout.write(secret + "\n")


@admin_app.command("rebuild-projection")
def admin_rebuild_projection(
    tenant: Annotated[str, typer.Option(help="Tenant whose search projection is re-derived.")],
    data_dir: DataDir = Path(".mnemo"),
) -> None:
    """Re-derive a tenant's search projection from its memories (a Temporal workflow), and wait for it."""
    from api.temporal import connect, start_projection_rebuild

    settings = _service_settings(data_dir)

    async def run() -> None:
        client = await connect(settings)
        handle = await start_projection_rebuild(client, settings.task_queue, tenant)
        typer.echo(f"mnemo: workflow {handle.id} started; waiting…", err=True)
        result = await handle.result()
        typer.echo(f"mnemo: rebuilt {result.rebuilt} memories in {result.batches} batch(es)")

    asyncio.run(run())


@app.command()
def backup(
    out: Annotated[Path, typer.Option("--out", help="Archive to write (pg_dump custom format).")],
    data_dir: DataDir = Path(".mnemo"),
) -> None:
    """Back up the database (MNEMO_DATABASE_URL, or the running `mnemo dev`)."""
    from api.backup import BackupError
    from api.backup import backup as run_backup

    try:
        run_backup(_service_settings(data_dir).require_database_url(), out)
    except BackupError as exc:
        fail(str(exc))
    typer.echo(f"mnemo: backup written to {out}")


@app.command()
def restore(
    archive: Annotated[Path, typer.Argument(help="An archive written by `mnemo backup`.")],
    data_dir: DataDir = Path(".mnemo"),
) -> None:
    """Restore a backup; tombstones of deletions made since are re-applied before it goes live."""
    from api.backup import BackupError
    from api.backup import restore as run_restore

    try:
        service = _service_settings(data_dir)
        report = run_restore(service.require_database_url(), archive, service)
    except BackupError as exc:
        fail(str(exc))
        raise
    typer.echo(
        f"mnemo: restored {archive}; re-applied {report.tombstones} tombstone(s) in {report.tenants} tenant(s), "
        f"scrubbing {report.rows_scrubbed} row(s)"
    )


@app.command(name="import-artifacts")
def import_artifacts(
    source: Annotated[Path, typer.Argument(help="A data directory of mnemo before the shared artifact store.")],
    data_dir: DataDir = Path(".mnemo"),
) -> None:
    """Move a data directory's task artifacts, record bodies and publications into the artifact store, once."""
    from api.artifact_import import import_all
    from memory.db import make_engine

    service = _service_settings(data_dir)
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


def _service_settings(data_dir: Path) -> Settings:
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
        raise
    return Settings(database_url=str(state["database_url"]), temporal_address=str(state["temporal_address"]))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
