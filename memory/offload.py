"""Heavy CPU work of one request, off the interpreter that serves everyone, at a lower CPU priority.

Issue 23, finding 7 (fair admission). A 100,000-token window (0.2 s of CPU), a deletion's barrier fingerprints
(0.3-0.6 s), its residue scan (1.4 s for a subject with 2,000 messages) and (issue 28) a report's charts
(0.3 s) ran in the API's or the worker's own interpreter. Every other tenant's request in that process then
waited for the interpreter lock in 5 ms turns, and on a small machine the kernel could not prefer a short request
to the bulk work. Here such work runs in a small pool of processes at a lower CPU priority: the serving interpreter
stays free, and the kernel runs any tenant's short request first.

The priority is the kernel's idle scheduling class (``SCHED_IDLE``) on Linux, besides the raised niceness. A raised
niceness alone was not enough (run 10 of the fair-admission benchmark): the kernel's EEVDF scheduler lets a
waking normal task wait for a niced one's time slice, so a request that wakes three times (API thread, database
backend, API again) waited up to three slices whenever both cores ran pool work — a pipe ping-pong beside three
busy niced processes went from 1.1 to 4.3-4.6 ms p95, beside three ``SCHED_IDLE`` ones it stayed at 1.2-1.4 ms.
A task of the idle class is preempted at once by any waking normal task. Elsewhere the niceness alone applies.

A process calls :func:`start` once (the API at start-up, the worker likewise); until then, and in tools and
tests that never start one, :func:`run` calls the function in place. The functions sent must be importable
module-level functions of picklable arguments and results (the pool spawns fresh interpreters: a fork of a
process holding threads and open connections would inherit them half-copied).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

from sqlalchemy import Engine

from memory.db import engine_recipe, shared_engine, tenant_session
from memory.priority import IDLE_CLASS, lower_priority, scheduling_class

T = TypeVar("T")


BEAT_SECONDS = 1.0
"""How often a caller's ``beat`` is called while it waits for the pool (well inside any heartbeat timeout)."""

ORPHAN_CHECK_SECONDS = 1.0
"""How often a pool process checks that its parent still lives."""


class PoolBusy(TimeoutError):
    """The pool did not answer within the caller's patience: its processes are busy, or starved by the work of
    every other process (they run in the idle class). A caller holding locks does the work itself instead."""


class PoolPriorityRefused(RuntimeError):
    """The pool's processes could not be put in the idle scheduling class (a sandbox refusing the call)."""


def _start_pool_process(niceness: int, idle: bool, parent: int) -> None:
    """In each pool process: yield the CPU to the serving processes (:func:`memory.priority.lower_priority`; a
    refused class is reported by :func:`_ready`), and end with the owner (:func:`_exit_with_parent`)."""
    lower_priority(niceness, idle)
    threading.Thread(target=_exit_with_parent, args=(parent,), name="mnemo-orphan-watch", daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    """A pool process outlives a parent killed outright (SIGKILL, out of memory): nothing would end it, and every
    killed worker would leave its pool behind. It ends itself once ``parent`` (the pool's owner, named by the owner,
    so that one which died while this process was starting counts too) is no longer its parent."""
    while os.getppid() == parent:
        time.sleep(ORPHAN_CHECK_SECONDS)
    os._exit(0)


def _ready() -> tuple[int, int | None]:
    """This process's id and scheduling class (``None`` where the platform has no classes)."""
    return os.getpid(), scheduling_class()


class CpuPool:
    """``workers`` spawned processes at ``niceness`` above their parent's and, when ``idle``, in the kernel's idle
    scheduling class."""

    def __init__(self, workers: int, niceness: int, idle: bool = True) -> None:
        self.workers = workers
        self.niceness = niceness
        self.idle = idle
        self._lock = threading.Lock()
        self._executor = self._new()

    def _new(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_start_pool_process, initargs=(self.niceness, self.idle, os.getpid()))

    def warm(self) -> set[int]:
        """Start every process now (a spawn imports the project: ~1 s), not on the first heavy request; a process
        that could not enter the idle class fails the start, saying what to set instead."""
        ready = [future.result() for future in [self._executor.submit(_ready) for _ in range(self.workers * 2)]]
        if self.idle and any(policy not in (None, IDLE_CLASS) for _, policy in ready):
            self.close()
            raise PoolPriorityRefused(
                "the CPU pool's processes could not enter the kernel's idle scheduling class (SCHED_IDLE); "
                "set MNEMO_CPU_POOL_IDLE=false to run them at the raised niceness alone"
            )
        return {pid for pid, _ in ready}

    def run(self, fn: Callable[..., T], /, *args: object, patience: float | None = None,
            beat: Callable[[], None] | None = None) -> T:
        """``fn(*args)`` in a pool process; its exception is raised here. A pool whose process died (killed,
        out of memory) is replaced once: the work is retried in a fresh one. No answer within ``patience``
        seconds: :class:`PoolBusy` (the work still runs there; its answer is dropped). ``beat`` is called every
        :data:`BEAT_SECONDS` meanwhile: an activity waiting here must still heartbeat."""
        executor = self._executor
        try:
            return self._wait(executor.submit(fn, *args), patience, beat)
        except BrokenProcessPool:
            with self._lock:
                if self._executor is executor:
                    self._executor = self._new()
                executor = self._executor
            return self._wait(executor.submit(fn, *args), patience, beat)

    @staticmethod
    def _wait(future: Future[T], patience: float | None, beat: Callable[[], None] | None) -> T:
        deadline = None if patience is None else time.monotonic() + patience
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            last = beat is None or (left is not None and left <= BEAT_SECONDS)  # no beat due before the patience ends
            try:
                return future.result(timeout=left if last else BEAT_SECONDS)
            except TimeoutError as exc:
                if last:  # the caller's patience is spent
                    future.cancel()  # still queued: it never starts
                    raise PoolBusy(f"the CPU pool gave no answer within {patience} s") from exc
            assert beat is not None
            beat()

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


_pool: CpuPool | None = None
_users = 0
_guard = threading.Lock()


def start(workers: int, niceness: int, idle: bool = True) -> CpuPool | None:
    """This process's pool, warm (``workers`` 0: none, the work runs in place). Counted: an app started while
    another runs in the same process (tests) shares the first one's pool until the last :func:`stop`."""
    global _pool, _users
    with _guard:
        if _pool is None and workers > 0:
            pool = CpuPool(workers, niceness, idle)
            pool.warm()  # a refused start counts no user
            _pool = pool
        _users += 1
        return _pool


def stop() -> None:
    """One user of the pool is done; the last one's stop ends its processes."""
    global _pool, _users
    with _guard:
        _users = max(0, _users - 1)
        pool = _pool if _users == 0 else None
        if pool is not None:
            _pool = None
    if pool is not None:
        pool.close()


def in_tenant(engine: Engine, tenant_id: str, fn: Callable[..., T], /, *args: object, inline: bool = False,
              patience: float | None = None) -> T:
    """``fn(session, *args)`` in a transaction of ``tenant_id``: in this process's pool on a connection of its own,
    made as ``engine``'s is (same database, role and statement timeout), when it has a pool and the work is not
    ``inline``; else on ``engine``, in place."""
    pool = _pool  # read once: a stop() meanwhile leaves this call its pool
    if pool is None or inline:
        with tenant_session(engine, tenant_id) as session:
            return fn(session, *args)
    url, timeout = engine_recipe(engine)
    result: T = pool.run(_in_tenant, url, timeout, tenant_id, fn, *args, patience=patience)
    return result


def _in_tenant(url: str, timeout: float | None, tenant_id: str, fn: Callable[..., T], *args: object) -> T:
    """In a pool process: :func:`in_tenant`'s work on this process's engine for the caller's."""
    with tenant_session(shared_engine(url, timeout), tenant_id) as session:
        return fn(session, *args)


def pooled() -> bool:
    """Whether this process has a pool (else :func:`run` and :func:`in_tenant` work in place)."""
    return _pool is not None


def run(fn: Callable[..., T], /, *args: object, inline: bool = False, patience: float | None = None,
        beat: Callable[[], None] | None = None) -> T:
    """``fn(*args)`` in this process's pool when it has one, else (or when ``inline``: small work, which would
    wait behind large work in the pool) in place; ``beat``: see :meth:`CpuPool.run`."""
    pool = _pool
    return fn(*args) if pool is None or inline else pool.run(fn, *args, patience=patience, beat=beat)


__all__ = ["CpuPool", "PoolBusy", "PoolPriorityRefused", "in_tenant", "pooled", "run", "start", "stop"]
