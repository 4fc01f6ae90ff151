"""What the wall ran, counted across the whole test run (printed in pytest's terminal summary)."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field


@dataclass
class WallStats:
    sequences: int = 0
    steps: int = 0
    checks: int = 0
    rules: Counter[str] = field(default_factory=Counter)
    seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))  # rule, invariant, read
    started: float | None = None  # when the first sequence began (not when this module was imported)
    trace: list[str] = field(default_factory=list)  # the actions of the sequence running last

    def line(self) -> str:
        rules = ", ".join(f"{name} {count}" for name, count in sorted(self.rules.items()))
        ranked = sorted(self.seconds.items(), key=lambda item: -item[1])[:12]
        slowest = ", ".join(f"{name} {seconds:.0f}s" for name, seconds in ranked)
        return (f"wall: {self.sequences} sequences, {self.steps} steps, {self.checks} invariant checks "
                f"in {time.monotonic() - (self.started or time.monotonic()):.0f}s ({rules}; time: {slowest})")


STATS = WallStats()
