"""The named stages of one recall, and the one hook that lets an adapter measure them.

The stage names are part of what recall *is* (what an operator reads on a dashboard); how a stage
is measured (a histogram, a span) is the adapter's business, so memory/ imports neither. A
:class:`StageClock` marks where each stage ends; without an observer a mark costs a clock read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import StrEnum


class Stage(StrEnum):
    PLAN = "plan"
    """The snapshot revision and the effective preferences (profile read, request constraints)."""
    CANDIDATES = "candidates"
    """Exact-key, full-text, trigram and vector candidates inside the hard filters, and their re-read."""
    RANKING = "ranking"
    """Scores, the stable rank, the relevance cut, task staleness and conflicts."""
    ASSEMBLE = "assemble"
    """The token budget and the bundle itself."""
    AUDIT = "audit"
    """The MEMORY_BUNDLE_BUILT event and the usage counters."""


StageObserver = Callable[[Stage, int, int], None]
"""Called with a stage and its start and end (``time.time_ns()``) once it ended."""

_observer: StageObserver | None = None


def observe_stages(observer: StageObserver | None) -> None:
    """Install the process's stage observer (the API's metrics and spans); None removes it."""
    global _observer
    _observer = observer


class StageClock:
    """One recall's stages, end to end: each :meth:`end` closes a stage where the previous one ended."""

    def __init__(self) -> None:
        self._last = time.time_ns()

    def end(self, name: Stage) -> None:
        now = time.time_ns()
        if _observer is not None:
            _observer(name, self._last, now)
        self._last = now
