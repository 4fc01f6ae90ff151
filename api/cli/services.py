"""``mnemo dev``, ``migrate``, ``worker`` and ``api``: the embedded dev stack and the production services."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Annotated

import typer

from api.cli.hints import DEFAULT_DATA_DIR
from api.cli.options import StackDataDir
from api.cli.output import fail
from api.settings import Settings
from memory.errors import MnemoError
from memory.tasks import registry


def dev(
    data_dir: StackDataDir = DEFAULT_DATA_DIR,
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
    from api.cli.demo import run_demo
    from api.devstack.stack import DevOptions, run_dev
    from api.devstack.supervisor import RestartPolicy

    settings = Settings()
    restart = RestartPolicy(limit=settings.dev_restart_limit, window=settings.dev_restart_window_seconds)
    options = DevOptions(data_dir=data_dir, port=port, temporal_port=temporal_port, demo=demo, restart=restart,
                         ui_port=temporal_ui_port)
    raise typer.Exit(run_dev(options, run_demo if demo else None))


def migrate() -> None:
    """Apply database migrations to MNEMO_DATABASE_URL."""
    from migrations import upgrade

    upgrade(Settings().require_database_url())
    typer.echo("mnemo: database schema is up to date")


TaskModules = Annotated[
    str | None,
    typer.Option("--tasks", help="Modules declaring your task types (mnemo's SDK), comma-separated: a.b,c.d "
                 "(sets MNEMO_TASK_MODULES; the API and every worker load the same ones)."),
]


def _with_tasks(settings: Settings, tasks: str | None) -> Settings:
    """The settings with ``--tasks``, its modules loaded now: one that cannot be used ends the command with its
    code and problem on one line (before anything starts), never a traceback."""
    settings = settings if tasks is None else settings.model_copy(update={"task_modules": tasks})
    try:
        registry.load(settings.task_module_names())
    except MnemoError as exc:
        fail(f"{exc.code}: {exc.message}")
    return settings


def worker(
    metrics_port: Annotated[
        int | None, typer.Option(help="Serve /metrics (mnemo's and the Temporal SDK's) on this port.")
    ] = None,
    tasks: TaskModules = None,
    processes: Annotated[
        int,
        typer.Option(min=1, max=64, help="Worker processes on the same task queues (one uses about one core), "
                     "restarted when they crash; with --metrics-port, process i serves /metrics on that port + i."),
    ] = 1,
) -> None:
    """Run the Temporal worker against MNEMO_DATABASE_URL and MNEMO_TEMPORAL_ADDRESS."""
    from api.observability.logging import configure_logging
    from api.observability.tracing import configure_tracing
    from api.worker import run_worker

    settings = _with_tasks(Settings(), tasks)
    if processes > 1:
        from api.devstack.supervisor import RestartPolicy
        from api.worker_processes import run_worker_processes

        settings.require_database_url()
        policy = RestartPolicy(limit=settings.dev_restart_limit, window=settings.dev_restart_window_seconds)
        raise typer.Exit(run_worker_processes(processes, tasks, metrics_port, policy))
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


def api(tasks: TaskModules = None) -> None:
    """Serve the HTTP API (uvicorn) on MNEMO_API_HOST:MNEMO_API_PORT."""
    import uvicorn

    from api.httpserver import BoundedHttpToolsProtocol
    from api.main import create_app
    from api.observability.logging import configure_logging
    from api.observability.tracing import configure_tracing

    settings = _with_tasks(Settings(), tasks)
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

