"""Restarting ``mnemo dev``'s children (and ``mnemo worker --processes N``'s) when they crash, and giving up on
one that keeps crashing.

A crashed child (worker, API, Temporal dev server, PostgreSQL) is started again after an
exponential backoff and the crash is reported in one line. A child that crashes ``limit`` times
within ``window`` seconds stops the stack with one line naming it and its last exit. Nothing is
lost by a restart: PostgreSQL starts on the same data directory (a crash is recovered from its
WAL) and the Temporal dev server on the same SQLite file.

Every restart happens on the caller's thread, which must be the main thread: the kernel's
parent-death signal (``processes.spawn``) is bound to the thread that started a child, so a
child started from a short-lived thread would be killed when that thread ends.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from api.devstack.processes import StackError, describe_exit, last_line


@dataclass(frozen=True)
class RestartPolicy:
    """How crashes are answered: ``limit`` crashes within ``window`` seconds stop the stack."""

    limit: int = 5
    window: float = 60.0
    first_delay: float = 0.5
    max_delay: float = 30.0

    def delay(self, recent_crashes: int) -> float:
        """Backoff before the next start: doubles with each crash still inside the window."""
        return min(self.max_delay, self.first_delay * 2.0 ** max(0, recent_crashes - 1))


@dataclass
class Child:
    """One supervised child: how to tell it exited, how to start it again, where it logs."""

    name: str
    poll: Callable[[], int | None]
    """The exit code once the child has exited, None while it runs."""
    restart: Callable[[], None]
    """Start it again and return once it runs (raises :class:`StackError` if it cannot)."""
    pid: Callable[[], int | None]
    log_path: Path | None
    """Where it logs (None: to the supervisor's own output, where its last line is not read back)."""
    crashes: deque[float] = field(default_factory=deque)
    restart_at: float | None = None
    last_reason: str = ""


class Supervisor:
    """Watches children (in dependency order) and restarts those that exited."""

    def __init__(
        self,
        children: list[Child],
        policy: RestartPolicy,
        *,
        say: Callable[[str], None],
        on_restarted: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
        command: str = "mnemo dev",
        whole: str = "the stack",
    ) -> None:
        """``command`` begins each line said; ``whole`` is what a child that keeps crashing stops."""
        self.children = children
        self.command = command
        self.whole = whole
        self.policy = policy
        self.say = say
        self.on_restarted = on_restarted
        self.clock = clock

    def tick(self) -> None:
        """Notice exits and run due restarts; raises :class:`StackError` when a child keeps crashing."""
        for child in self.children:
            if child.restart_at is None:
                code = child.poll()
                if code is not None:
                    self._crashed(child, self._reason(child, describe_exit(code)))
            if child.restart_at is not None and self.clock() >= child.restart_at:
                self._restart(child)

    @property
    def restarting(self) -> list[str]:
        """Children waiting for their restart right now."""
        return [child.name for child in self.children if child.restart_at is not None]

    @staticmethod
    def _reason(child: Child, what: str) -> str:
        line = last_line(child.log_path) if child.log_path is not None else None
        return f"{what}; last log line: {line}" if line else what

    def _crashed(self, child: Child, reason: str) -> None:
        now = self.clock()
        child.crashes.append(now)
        while child.crashes and child.crashes[0] < now - self.policy.window:
            child.crashes.popleft()
        child.last_reason = reason
        count = len(child.crashes)
        if count >= self.policy.limit:
            see = f"; see {child.log_path}" if child.log_path is not None else ""
            raise StackError(
                f"the {child.name} crashed {count} times within {self.policy.window:.0f}s, stopping {self.whole} "
                f"(last: {reason}){see}"
            )
        delay = self.policy.delay(count)
        child.restart_at = now + delay
        self.say(
            f"{self.command}: the {child.name} crashed ({reason}); restarting it in {delay:.1f}s "
            f"(crash {count} within {self.policy.window:.0f}s; {self.whole} stops at {self.policy.limit})"
        )

    def _restart(self, child: Child) -> None:
        child.restart_at = None
        began = self.clock()
        try:
            child.restart()
        except StackError as exc:
            self._crashed(child, f"restart failed: {exc}")
            return
        self.say(f"{self.command}: the {child.name} is running again (pid {child.pid()}, {self.clock() - began:.1f}s)")
        self.on_restarted()
