"""Child-process helpers shared by the embedded services.

Every child is started in its own process group (so a terminal Ctrl-C reaches
only the supervisor, which then stops children in order) and asks the kernel to
SIGTERM it if the supervisor dies, so no child outlives its owner.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import IO

_PR_SET_PDEATHSIG = 1


class StackError(RuntimeError):
    """A one-line, actionable error about the embedded stack (busy port, stale lock, ...)."""


def _die_with_parent() -> None:
    """preexec hook: SIGTERM this child when the process that started it dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def spawn(
    args: Sequence[str],
    *,
    log_path: Path | None,
    env: dict[str, str] | None = None,
    user: str | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start an owned child whose stdout and stderr go to ``log_path`` (None: to this process's own)."""
    if log_path is None:
        return _owned(args, None, env, user, cwd)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:  # the child keeps its own copy of the descriptor
        return _owned(args, log, env, user, cwd)


def _owned(
    args: Sequence[str], log: IO[bytes] | None, env: dict[str, str] | None, user: str | None, cwd: Path | None
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        list(args),
        stdout=log,
        stderr=subprocess.STDOUT if log is not None else None,
        stdin=subprocess.DEVNULL,
        env=env,
        user=user,
        cwd=cwd,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )


def stop(proc: subprocess.Popen[bytes], *, sig: int = signal.SIGTERM, timeout: float = 15.0) -> None:
    """Ask a child to stop with ``sig``; kill its whole group if it does not exit in time."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def proc_stats(zombies: bool = False) -> Iterator[tuple[Path, list[str]]]:
    """Each running process's /proc entry and the fields of its stat after the name (state, parent, ..., utime,
    stime, cutime, cstime at 11-14); zombies (they hold no memory) only when asked for, and processes that exit
    meanwhile are left out."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if zombies or fields[0] not in "ZX":
            yield entry, fields


def mapping(name: str) -> list[int]:
    """Pids of the running processes that have ``name`` mapped, as /proc/<pid>/maps shows it; processes we may not
    inspect are not ours and are left out."""
    pids = []
    for entry, _ in proc_stats():
        try:
            with open(entry / "maps") as maps:
                if any(line.rstrip().endswith(name) or f"{name} " in line for line in maps):
                    pids.append(int(entry.name))
        except OSError:  # exited meanwhile, or not ours to read
            continue
    return pids


def children(pid: int) -> list[int]:
    """Pids of the running processes whose parent is ``pid``."""
    return [int(entry.name) for entry, fields in proc_stats() if int(fields[1]) == pid]


def kill_all(find: Callable[[], list[int]], what: str, *, timeout: float = 10.0) -> None:
    """SIGKILL every process ``find`` names, again until it names none (each by its own pid)."""
    deadline = time.monotonic() + timeout
    while left := find():
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise StackError(f"{what} (pids {left}) did not exit after SIGKILL: kill them by hand")
        time.sleep(0.05)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid runs (one of another user counts: it runs, we may just not signal it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def require_free_port(port: int, what: str, flag: str) -> None:
    """Fail with a one-line error naming the port, its use and the flag that changes it."""
    if not port_is_free(port):
        raise StackError(
            f"port {port} ({what}) is already in use on 127.0.0.1: stop the process using it "
            f"or pass {flag} with a free port"
        )


_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_port_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections' source ports (Linux's default if unreadable)."""
    try:
        low, high = (int(part) for part in _EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def free_port(host: str = "127.0.0.1", *, avoid: Collection[int] = ()) -> int:
    """A port free right now, outside the kernel's ephemeral range (for services nobody types by hand).

    A port the kernel hands out for ``bind(0)`` comes from the same range as the source ports of
    outgoing connections, so between choosing it and the service binding it, any client (Temporal's
    own services start dozens) can take it, and the service then fails with "address already in use";
    a supervised restart on the same port can meet the same fate. Below (or above) that range only a
    listener can take it.
    """
    low, high = ephemeral_port_range()
    if low > 11024:
        pool = range(max(1024, low - 12000), low)
    elif high < 64535:
        pool = range(high + 1, 65536)
    else:  # the whole range is ephemeral: nothing better than the kernel's choice
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            return int(sock.getsockname()[1])
    rng = random.SystemRandom()
    for _ in range(500):
        port = rng.choice(pool)
        if port not in avoid and port_is_free(port, host):
            return port
    raise StackError(f"no free port in {pool.start}-{pool.stop - 1} on {host}: too many services are listening")


def describe_exit(code: int) -> str:
    """A child's exit status in words: ``killed by SIGKILL`` or ``exit code 3``."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def last_line(path: Path, limit: int = 8192) -> str | None:
    """The last non-empty line of a log (read from its end only), cut to 200 characters; None if there is none."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            tail = handle.read().decode(errors="replace")
    except OSError:
        return None
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    if not lines:
        return None
    line = lines[-1]
    return line if len(line) <= 200 else line[:199] + "…"


def seconds_since_process_start() -> float | None:
    """How long ago this process was exec'd (the kernel's clock), so that start-up figures include the time
    Python spends importing before any of our code runs; None where /proc does not say."""
    try:
        stat = Path("/proc/self/stat").read_text()
        started_ticks = int(stat[stat.rindex(")") + 2:].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return uptime - started_ticks / os.sysconf("SC_CLK_TCK")
