"""What a step implementation receives (:class:`StepContext`) and returns (:class:`StepOutcome`).

Implementations are plain functions of a :class:`StepContext`; they never touch
the task read model (the engine records attempts, artifacts and transitions).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session


@dataclass(frozen=True)
class ProducedArtifact:
    name: str
    kind: str
    media_type: str
    content: bytes


@dataclass
class StepOutcome:
    output: dict[str, Any]
    artifacts: list[ProducedArtifact] = field(default_factory=list)


class StepFailed(Exception):
    """A business failure retrying cannot fix (no data, nothing valid): the task fails with this code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class StepContext:
    tenant_id: str
    task_id: str
    task_type: str
    goal: dict[str, Any]
    input_version: str
    inputs: dict[str, dict[str, Any]]
    """Outputs of the earlier steps, by step id."""
    extra: dict[str, Any]
    """Engine-supplied extras, e.g. ``revision`` and ``reviewer_note`` when a draft is regenerated."""
    session: Callable[[], AbstractContextManager[Session]]
    """A tenant-scoped transaction (for steps that read source data)."""
    read_artifact: Callable[[str], bytes]
    heartbeat: Callable[[], None]
    artifacts: dict[str, dict[str, str]] = field(default_factory=dict)
    """Earlier steps' artifacts: step id → artifact name → sha256 (read them with ``read_artifact``)."""
    bundle: Mapping[str, Any] | None = None
    """The memory bundle the step's ``recall`` asked for (the task owner's memories), else None: ``text`` (the
    bundle as a prompt quotes it), ``memories`` (``memory_id``, ``version``, ``key``, ``content``, ``score``, ...),
    ``effective_preferences``, ``warnings`` and the audited recall's ``trace_id``."""


StepFn = Callable[[StepContext], StepOutcome]
"""A step implementation: pure apart from the source data it reads through ``StepContext.session``."""
