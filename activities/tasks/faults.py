"""Fault injection for the report task's steps: tests, demos and crash drills; production runs with none."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field

from sqlalchemy import Engine, create_engine
from sqlalchemy.pool import NullPool
from temporalio import activity


@dataclass(frozen=True)
class FaultPlan:
    """``slow_steps``: steps that stall (heartbeating) before they run. ``unreachable_database``: the
    first N attempts of a step find the database refusing connections (a real connection to a
    closed port, the error an outage raises). ``broken_steps``: the first N attempts of a step raise
    an unexpected exception, as a bug would.
    """

    slow_steps: dict[str, float] = field(default_factory=dict)
    unreachable_database: dict[str, int] = field(default_factory=dict)
    broken_steps: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_spec(cls, slow_steps: str) -> FaultPlan:
        """``generate_charts=30,load_data=5`` (seconds; settings: MNEMO_TASK_SLOW_STEPS), for crash drills."""
        slow: dict[str, float] = {}
        for item in filter(None, slow_steps.split(",")):
            step, _, seconds = item.partition("=")
            slow[step.strip()] = float(seconds)
        return cls(slow_steps=slow)


def heartbeat() -> None:
    if activity.in_activity():
        activity.heartbeat()


def connect_to_closed_port(engine: Engine) -> None:
    """Connect to the database's host on a port nobody listens on (connection refused)."""
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dead = create_engine(engine.url.set(host="127.0.0.1", port=port), poolclass=NullPool)
    try:
        with dead.connect():
            pass
    finally:
        dead.dispose()


def stall(seconds: float) -> None:
    """Wait (heartbeating, so the worker looks alive) before running the step."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        heartbeat()
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
