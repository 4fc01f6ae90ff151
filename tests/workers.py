"""A real Temporal worker for tests, on its own event loop in a background thread, so that
synchronous tests (TestClient calls, polling) can wait while it works."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from api.devstack.processes import free_port
from api.httpserver import BoundedHttpToolsProtocol
from api.main import create_app
from api.settings import Settings
from api.temporal import connect
from api.worker import build_worker
from memory.deletion.rounds import ScanBudget


def worker_env(settings: Settings, **extra: str) -> dict[str, str]:
    """The environment of a real ``mnemo worker`` process for ``settings``: no stray ``MNEMO_*`` from outside."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env.update(
        MNEMO_DATABASE_URL=settings.require_database_url(),
        MNEMO_TEMPORAL_ADDRESS=settings.temporal_address,
        MNEMO_TEMPORAL_NAMESPACE=settings.temporal_namespace,
        MNEMO_TASK_QUEUE=settings.task_queue,
        MNEMO_CPU_POOL_IDLE=str(settings.cpu_pool_idle).lower(),
        MNEMO_RESIDUE_SCAN_SHARE=str(settings.residue_scan_share),
        MNEMO_RESIDUE_SCAN_BURST_SECONDS=str(settings.residue_scan_burst_seconds),
        **extra,
    )
    return env


class ThreadWorker:
    """A Temporal worker on its own event loop in a background thread."""

    def __init__(self, settings: Settings, engine: Engine, task_queue: str, *, default_threads: int | None = None,
                 **options: Any) -> None:
        """``default_threads``: the size of the event loop's default executor (``asyncio.to_thread``), to show that
        no activity waits on it while holding one of its threads; ``options`` go to ``build_worker`` (the
        residue scan budget, unless given, is the settings', as ``mnemo worker``'s is)."""
        options.setdefault("scan_budget", ScanBudget(settings.residue_scan_share, settings.residue_scan_burst_seconds))
        self.settings, self.engine, self.task_queue, self.options = settings, engine, task_queue, options
        self._default_threads = default_threads
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # surfaced by start()
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._default_threads is not None:
            self._loop.set_default_executor(ThreadPoolExecutor(max_workers=self._default_threads))
        self._stop = asyncio.Event()
        client = await connect(self.settings)
        with ThreadPoolExecutor(max_workers=8) as executor:
            async with build_worker(client, self.engine, self.task_queue, executor, **self.options):
                self._ready.set()
                await self._stop.wait()

    def start(self) -> ThreadWorker:
        self._thread.start()
        self._ready.wait(60)
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(60)


@contextmanager
def api_with_worker(settings: Settings, engine: Engine, name: str, **updates: Any) -> Iterator[TestClient]:
    """An API and a real worker on a task queue of their own (``name-xxxxxxxx``): tasks reach an approval
    and publish, deletions purge, whichever other workers the session runs. ``updates``: settings both read
    (e.g. ``webhook_allowed_hosts``); the app's are ``client.app.state.settings``."""
    own = settings.model_copy(update={"task_queue": f"{name}-{uuid.uuid4().hex[:8]}", **updates})
    worker = ThreadWorker(own, engine, own.task_queue, artifacts=own.artifact_root(engine),
                          webhook_allowed=own.webhook_allow_list()).start()
    try:
        with TestClient(create_app(own)) as client:
            yield client
    finally:
        worker.stop()


@contextmanager
def served(app: FastAPI, port: int | None = None) -> Iterator[int]:
    """``app`` behind a real uvicorn with ``mnemo api``'s protocol, in a thread of this process; its port
    (``port``, e.g. to restart an API where its clients still point, else a free one)."""
    port = port or free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, http=BoundedHttpToolsProtocol, log_level="warning")
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not running.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield port
    finally:
        running.should_exit = True
        thread.join(10)
