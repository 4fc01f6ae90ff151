"""``mnemo dev``: the whole stack as child processes this process owns.

Start order: Temporal (in the background) and the API (its start needs neither
PostgreSQL nor Temporal), PostgreSQL, migrations, the keys, the demo's sales data
(in the background), the worker; ready once the API's ``/readyz`` says everything
it advertises is there (the start-up line says when each part was). Once
running, a child that crashes is restarted (``supervisor``). Stop order is the
reverse. A terminal Ctrl-C reaches only this supervisor (children run in their
own process groups), and each child is told by the kernel to exit if the
supervisor dies.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from api.cli.hints import mnemo_hint
from api.devstack.postgres import EmbeddedPostgres
from api.devstack.processes import (
    StackError,
    free_port,
    pid_alive,
    require_free_port,
    seconds_since_process_start,
    spawn,
    stop,
)
from api.devstack.supervisor import Child, RestartPolicy, Supervisor
from api.devstack.temporal import TemporalDevServer
from api.settings import Settings
from memory.db import make_engine, tenant_session
from memory.enums import DEV_ADMIN_ROLES, Role
from memory.identity.auth import create_api_key

DEFAULT_TENANT = "default"
ADMIN_USER = "admin"
DEMO_APPROVER = "demo-approver"
"""The demo's second person: the demo's task belongs to the admin, who may not approve it (separation of duties)."""
STATE_FILE = "stack.json"


@dataclass(frozen=True)
class DevOptions:
    data_dir: Path
    port: int = 8000
    temporal_port: int = 7233
    demo: bool = True
    """Seed the demo's sales data (readiness waits for it), then write and recall a demo memory."""
    restart: RestartPolicy = field(default_factory=RestartPolicy)
    ui_port: int | None = None
    """The Temporal UI's port (``--temporal-ui-port``); None: the Temporal port + 1000."""

    @property
    def temporal_ui_port(self) -> int:
        return self.ui_port if self.ui_port is not None else self.temporal_port + 1000


def say(message: str) -> None:
    print(message, flush=True)


@contextmanager
def _exclusive(data_dir: Path) -> Iterator[None]:
    """One ``mnemo dev`` per data dir. The kernel drops the lock when its holder dies, so it is never stale."""
    lock_path = data_dir / "dev.lock"
    with open(lock_path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise StackError(
                f"another `mnemo dev` (pid {holder}) is using {data_dir}: stop it first "
                "(Ctrl-C in its terminal) or pass --data-dir with another folder"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield


def read_state(data_dir: Path) -> dict[str, object]:
    """What a running ``mnemo dev`` published about itself (URLs, pids), for other commands."""
    state = _recorded_state(data_dir)
    if state is None:
        raise StackError(
            f"no running `mnemo dev` in {data_dir.resolve()}: start it with `{mnemo_hint('dev', data_dir=data_dir)}` "
            "or set MNEMO_DATABASE_URL"
        )
    return state


def running_api_url(data_dir: Path) -> str | None:
    """The API URL the running ``mnemo dev`` of ``data_dir`` listens on (``--port``), or None when none runs."""
    state = _recorded_state(data_dir)
    return str(state["api_url"]) if state is not None else None


def _recorded_state(data_dir: Path) -> dict[str, object] | None:
    """``stack.json`` of a ``mnemo dev`` that still runs (one killed with SIGKILL leaves it behind)."""
    path = data_dir.resolve() / STATE_FILE
    try:
        state: dict[str, object] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    pid = state.get("pid")
    if not isinstance(pid, int) or not pid_alive(pid):
        return None
    return state


def _ensure_key(database_url: str, key_path: Path, user_id: str, roles: Iterable[Role]) -> None:
    """Create a key of the default tenant into ``key_path`` (owner-only), unless the file exists."""
    if key_path.exists():
        return
    engine = make_engine(database_url, pool_size=1)
    try:
        with tenant_session(engine, DEFAULT_TENANT) as session:
            key = create_api_key(
                session, tenant_id=DEFAULT_TENANT, user_id=user_id, roles=[role.value for role in roles],
                actor="mnemo-dev",
            )
    finally:
        engine.dispose()
    key_path.touch(mode=0o600)
    key_path.write_text(key + "\n")


class DevStack:
    def __init__(self, options: DevOptions) -> None:
        self.options = options
        self.data_dir = options.data_dir.resolve()
        self.postgres = EmbeddedPostgres(self.data_dir, port=free_port())
        self.temporal = TemporalDevServer(
            self.data_dir, port=options.temporal_port, ui_port=options.temporal_ui_port, namespace="mnemo"
        )
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self.settings: Settings | None = None
        self.supervisor: Supervisor | None = None
        self._seeding: threading.Thread | None = None
        self._seed_error: BaseException | None = None
        self._seeded_at: float | None = None
        self._began = time.monotonic()

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.options.port}"

    @property
    def temporal_ui_url(self) -> str:
        return f"http://127.0.0.1:{self.options.temporal_ui_port}"

    def _step(self, label: str, action: Callable[[], str | None]) -> None:
        """Run one start-up step and print how long it took (and where that time went, when it says)."""
        started = time.monotonic()
        detail = action()
        say(f"  ✓ {label} ({time.monotonic() - started:.1f}s{': ' + detail if detail else ''})")

    def start(self) -> None:
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        ports = (self.options.port, self.options.temporal_port, self.options.temporal_ui_port)
        if len(set(ports)) < len(ports):
            raise StackError(
                f"ports must differ: the mnemo API's {ports[0]} (--port), Temporal's {ports[1]} (--temporal-port) "
                f"and its UI's {ports[2]} (--temporal-ui-port, by default --temporal-port + 1000)"
            )
        require_free_port(self.options.port, "mnemo API", "--port")
        require_free_port(self.options.temporal_port, "Temporal frontend", "--temporal-port")
        require_free_port(self.options.temporal_ui_port, "Temporal UI", "--temporal-ui-port")
        self._began = began = time.monotonic()
        say(f"mnemo dev: starting the stack in {self.data_dir}")
        # Everything that can overlap does (two cores are common): Temporal starts in the background; the API,
        # whose start touches neither PostgreSQL nor Temporal and costs seconds of imports, starts at once; the
        # worker (which waits for Temporal by itself) once the schema is there; the demo's data loads on a thread.
        self.temporal.start()
        database_url = self.postgres.info().url()
        self.settings = Settings(
            database_url=database_url,
            temporal_address=self.temporal.address,
            temporal_namespace="mnemo",
            api_port=self.options.port,
            data_dir=self.data_dir,
        )
        self._spawn("api")

        def start_postgres() -> None:
            self.postgres.start()

        self._step("PostgreSQL 18 + pgvector + pg_trgm", start_postgres)
        from migrations import upgrade

        self._step("migrations", lambda: upgrade(database_url))
        self._import_artifacts(database_url)
        self._step("admin key", lambda: _ensure_key(database_url, self.key_path, ADMIN_USER, DEV_ADMIN_ROLES))
        if self.options.demo:
            self._step("demo approver key", lambda: _ensure_key(
                database_url, self.approver_key_path, DEMO_APPROVER, [Role.APPROVER]))
            self._seeding = threading.Thread(target=self._seed_demo_data, args=(database_url,), daemon=True)
            self._seeding.start()
        self._spawn("worker")
        self._step("Temporal dev server", self.temporal.wait_ready)
        waited_for = "worker and API" + (" (and the demo's sales data)" if self.options.demo else "")
        self._step(waited_for, self._wait_api_ready)
        self._write_state()
        self.supervisor = Supervisor(self._supervised(), self.options.restart, say=say, on_restarted=self._write_state)
        since_exec = seconds_since_process_start()
        say(f"mnemo dev: ready in {time.monotonic() - began:.1f}s"
            + (f" ({since_exec:.1f}s since the command started)" if since_exec is not None else ""))

    def _import_artifacts(self, database_url: str) -> None:
        """A data directory from before the shared artifact store: its files move into it, once (a step only then)."""
        from api.artifact_import import import_all, pending
        from memory.db import make_engine

        if not pending(self.data_dir):
            return
        engine = make_engine(database_url, pool_size=1)
        try:
            assert self.settings is not None
            report = import_all(self.data_dir, engine, self.settings.artifact_root(engine))
        finally:
            engine.dispose()
        say(f"mnemo dev: {report.summary(self.data_dir)}")

    def _spawn(self, name: str) -> None:
        """Start the worker or the API (``mnemo worker`` / ``mnemo api`` with this stack's settings)."""
        env = {**os.environ, **self._child_env()}
        self.children[name] = spawn(
            [sys.executable, "-m", "api.cli", name], log_path=self.data_dir / "logs" / f"{name}.log", env=env
        )

    def _supervised(self) -> list[Child]:
        """Every child, dependencies first, so that one tick restarts PostgreSQL before the API."""
        logs = self.data_dir / "logs"

        def restart_postgres() -> None:
            try:
                self.postgres.start()
            except StackError:
                self.postgres.stop()  # one that started but never answered must not hold the port for the next try
                raise

        def restart_temporal() -> None:
            try:
                self.temporal.start()
                self.temporal.wait_ready()
            except StackError:
                self.temporal.stop()
                raise

        def process(name: str, label: str) -> Child:
            return Child(
                name=label,
                poll=lambda: self.children[name].poll(),
                restart=lambda: self._spawn(name),
                pid=lambda: self.children[name].pid,
                log_path=logs / f"{name}.log",
            )

        return [
            Child(
                name="PostgreSQL server",
                poll=self.postgres.poll,
                restart=restart_postgres,
                pid=lambda: self.postgres.pid,
                log_path=self.postgres.log_path,
            ),
            Child(
                name="Temporal dev server",
                poll=self.temporal.poll,
                restart=restart_temporal,
                pid=lambda: self.temporal.pid,
                log_path=self.temporal.log_path,
            ),
            process("worker", "worker"),
            process("api", "API"),
        ]

    def supervise(self) -> None:
        """One round of supervision: restart what crashed (raises :class:`StackError` to stop the stack)."""
        assert self.supervisor is not None
        self.supervisor.tick()

    def _seed_demo_data(self, database_url: str) -> None:
        """Load the demo tenant's sample sales data once (a thread: readiness waits for it, start-up need not)."""
        from memory.reports.sales import seed_sales

        try:
            engine = make_engine(database_url, pool_size=1)
            try:
                with tenant_session(engine, DEFAULT_TENANT) as session:
                    seed_sales(session, DEFAULT_TENANT)
            finally:
                engine.dispose()
            self._seeded_at = time.monotonic()
        except BaseException as exc:  # reported by the start-up wait, which stops the stack
            self._seed_error = exc

    def _child_env(self) -> dict[str, str]:
        assert self.settings is not None
        return {
            "MNEMO_DATABASE_URL": self.settings.require_database_url(),
            "MNEMO_TEMPORAL_ADDRESS": self.settings.temporal_address,
            "MNEMO_TEMPORAL_NAMESPACE": self.settings.temporal_namespace,
            "MNEMO_API_HOST": "127.0.0.1",
            "MNEMO_API_PORT": str(self.options.port),
            "MNEMO_DATA_DIR": str(self.data_dir),
            # /readyz waits for the demo's sales data: a report task started before it has no data.
            "MNEMO_READY_SAMPLE_DATA_TENANT": DEFAULT_TENANT if self.options.demo else "",
            # The console over plain http on localhost: its cookie cannot be Secure; workflows link to this UI.
            "MNEMO_CONSOLE_SECURE_COOKIE": "false",
            "MNEMO_TEMPORAL_UI_URL": self.temporal_ui_url,
        }

    @property
    def key_path(self) -> Path:
        return self.data_dir / "admin.key"

    @property
    def approver_key_path(self) -> Path:
        return self.data_dir / "approver.key"

    def _wait_api_ready(self, timeout: float = 60.0) -> str:
        """Poll ``/readyz`` until 200; returns when each part became ready (seconds since the stack began to start),
        slowest last."""
        began = self._began
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        ready_at: dict[str, float] = {}
        while time.monotonic() < deadline:
            self.check_children()
            if self._seed_error is not None:
                raise StackError(f"loading the demo's sales data failed: {self._seed_error}")
            try:
                response = httpx.get(f"{self.api_url}/readyz", timeout=5)
            except httpx.HTTPError as exc:
                last = str(exc)
            else:
                now = time.monotonic() - began
                ready_at.setdefault("API answering", now)
                checks = response.json().get("checks", {}) if response.status_code in (200, 503) else {}
                for name, check in checks.items():
                    if isinstance(check, dict) and check.get("state") == "ok":
                        ready_at.setdefault(name, now)
                if response.status_code == 200:
                    if self._seeded_at is not None:
                        ready_at["demo_data"] = max(0.0, self._seeded_at - began)
                    return "ready at " + ", ".join(
                        f"{name} {at:.1f}s" for name, at in sorted(ready_at.items(), key=lambda i: i[1]))
                last = response.text
            time.sleep(0.2)
        raise StackError(f"the API was not ready within {timeout:.0f}s ({last}); see {self.data_dir / 'logs'}")

    def check_children(self) -> None:
        """During start-up any exit is fatal (a child that cannot start is not restarted)."""
        for name, proc in self.children.items():
            code = proc.poll()
            if code is not None:
                raise StackError(f"the {name} exited with code {code}; see {self.data_dir / 'logs' / (name + '.log')}")

    def _write_state(self) -> None:
        assert self.settings is not None
        state = {
            "pid": os.getpid(),
            "api_url": self.api_url,
            "database_url": self.settings.database_url,
            "temporal_address": self.temporal.address,
            "temporal_ui_url": self.temporal_ui_url,
            "admin_key_path": str(self.key_path),
            "child_pids": {
                **{name: proc.pid for name, proc in self.children.items()},
                "postgres": self.postgres.pid,
                "temporal": self.temporal.pid,
            },
        }
        path = self.data_dir / STATE_FILE
        path.touch(mode=0o600)
        path.write_text(json.dumps(state, indent=2))

    def stop(self) -> None:
        (self.data_dir / STATE_FILE).unlink(missing_ok=True)
        for name in ("api", "worker"):
            if name in self.children:
                stop(self.children.pop(name), timeout=15)
        self.temporal.stop()
        self.postgres.stop()


def _raise_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


@dataclass(frozen=True)
class DemoContext:
    """What the demo (run once the stack is ready) needs to drive it and to tell the newcomer what to run next."""

    api_url: str
    admin_key: str
    data_dir: Path
    approver_key_path: Path


def run_dev(options: DevOptions, demo: Callable[[DemoContext], None] | None) -> int:
    """Run the stack until SIGINT/SIGTERM; returns the process exit code."""
    data_dir = options.data_dir.resolve()
    created = not data_dir.exists()
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    # Explicit, because a shell that starts us in the background hands us SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        with _exclusive(data_dir):
            stack = DevStack(options)
            try:
                stack.start()
            except BaseException:
                stack.stop()
                _discard_failed_start(data_dir, created)
                raise
            try:
                _print_addresses(stack)
                if demo is not None:
                    # On a thread, so that supervision (main thread only: see supervisor) runs meanwhile.
                    context = DemoContext(stack.api_url, stack.key_path.read_text().strip(), options.data_dir,
                                          stack.approver_key_path)
                    threading.Thread(target=demo, args=(context,), daemon=True, name="demo").start()
                say("")
                say("Press Ctrl-C to stop.")
                while True:
                    stack.supervise()
                    time.sleep(0.2)
            except KeyboardInterrupt:
                say("\nmnemo dev: stopping…")
                return 0
            finally:
                stack.stop()
                say("mnemo dev: stopped")
    except KeyboardInterrupt:
        say("\nmnemo dev: stopped before it was ready")
        return 0
    except StackError as exc:
        print(f"mnemo dev: {exc}", file=sys.stderr, flush=True)
        return 1


def _print_addresses(stack: DevStack) -> None:
    say("")
    say(f"  console      {stack.api_url}/console/  (sign in with a key below)")
    say(f"  API docs     {stack.api_url}/docs")
    say(f"  Temporal UI  {stack.temporal_ui_url}/namespaces/{stack.temporal.namespace}/workflows")
    say(f"  admin key    {stack.key_path}  (tenant '{DEFAULT_TENANT}', every role but public_client)")
    if stack.options.demo:
        say(f"  approver key {stack.approver_key_path}  (user '{DEMO_APPROVER}': approves the demo's report)")
    say(f"  logs         {stack.data_dir / 'logs'}")


def _discard_failed_start(data_dir: Path, created: bool) -> None:
    """A start that failed leaves nothing half-made: the data dir it created goes whole, else its lock file."""
    if created:
        shutil.rmtree(data_dir, ignore_errors=True)
    else:
        (data_dir / "dev.lock").unlink(missing_ok=True)
