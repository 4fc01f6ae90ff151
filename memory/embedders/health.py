"""Counts of model calls that failed, by stage and error code, for ``/metrics`` to read.

Recall answers without its vector source or its rerank stage when their model fails (with a warning in
the bundle); each such answer is counted here, per process, and ``/metrics`` reads :func:`failure_counts` as
``mnemo_model_failures_total{stage, code}`` (:class:`api.observability.metrics.ModelFailures`).
"""

from __future__ import annotations

import threading
from collections import Counter

_lock = threading.Lock()
_failures: Counter[tuple[str, str]] = Counter()


def count_failure(stage: str, code: str) -> None:
    """One failed call of ``stage`` (``query_embedding``, ``rerank``) that ended in error ``code``."""
    with _lock:
        _failures[(stage, code)] += 1


def failure_counts() -> dict[tuple[str, str], int]:
    """(stage, code) → failures since the process started."""
    with _lock:
        return dict(_failures)
