"""Background CPU work yields to the serving processes: a raised niceness and, on Linux, the kernel's idle class.

One rule for every process that does bulk work beside requests: the CPU pool of :mod:`memory.offload` and the
worker's embedding engine (:class:`memory.embedders.engine.Embedder` with ``background``). Why the idle class
and not the niceness alone is told in :mod:`memory.offload`: a waking normal task preempts an idle-class one at
once, where it waits for a niced one's time slice.
"""

from __future__ import annotations

import contextlib
import os

IDLE_CLASS = getattr(os, "SCHED_IDLE", None)
"""The kernel's idle scheduling class, where the platform has one (Linux)."""


def lower_priority(niceness: int, idle: bool) -> None:
    """Yield the CPU to the serving processes, for the rest of this process. Neither a raise of niceness nor the
    move into the idle class needs a privilege; a refused move is left to the caller to find out
    (:func:`scheduling_class`), not raised here (a pool initializer's exception would only break the pool)."""
    os.nice(niceness)
    if idle and IDLE_CLASS is not None:
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, IDLE_CLASS, os.sched_param(0))


def scheduling_class(pid: int = 0) -> int | None:
    """The scheduling class of ``pid`` (0: this process); ``None`` where the platform has no classes."""
    return os.sched_getscheduler(pid) if IDLE_CLASS is not None else None
