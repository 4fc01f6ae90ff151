"""The public SDK for task types written in Python: the one module a team's package imports.

A module declares a :class:`TaskType`, its ``compute`` steps (functions of a :class:`StepContext` returning a
:class:`StepOutcome`), its approvals and its publications; loaded by ``mnemo worker --tasks your.module`` and
``mnemo api --tasks your.module`` (or the ``mnemo.tasks`` entry-point group), the type can be started with
``POST /tasks``. The README's "Your own task types (Python SDK)" has a complete example.

The steps run in the order they are declared. A task pins the definition it started with (:meth:`TaskType.definition`),
so changing a module's steps needs a new ``version``; running tasks keep theirs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memory.tasks import registry
from memory.tasks.contract import ProducedArtifact, StepContext, StepFailed, StepFn, StepOutcome
from memory.tasks.definitions import Definition, from_body, runnable


class TaskType:
    """A task type declared in code; it registers itself with the process's registry when created."""

    def __init__(self, task_type: str, version: str, goal_schema: dict[str, Any], *,
                 redraft_step: str | None = None) -> None:
        self.task_type = task_type
        self.version = version
        self.goal_schema = goal_schema
        self.redraft_step = redraft_step
        self._steps: list[dict[str, Any]] = []
        registry.declare_type(self)

    def compute(self, step_id: str, *, timeout_seconds: int | None = None,
                recall: dict[str, str] | None = None) -> Callable[[StepFn], StepFn]:
        """Declare a ``compute`` step run by the decorated function (``@reports.compute("load")``).
        ``timeout_seconds``: the longest one attempt may run (default 10 minutes). ``recall``: ``{"query",
        "intent"?}``, the task owner's memory bundle the function finds in ``ctx.bundle`` (the query may quote the
        goal: ``"runbook for {{goal.service}}"``)."""

        def declare(function: StepFn) -> StepFn:
            self._add(step_id, "compute", function, function=registry.hook_name(self.task_type, step_id),
                      timeout_seconds=timeout_seconds, recall=recall)
            return function

        return declare

    def agent(self, step_id: str, *, description: str | None = None, timeout_seconds: int | None = None) -> None:
        """Declare an ``agent`` step: done by an agent outside the worker, in any language, over the API (claim,
        heartbeat, complete; README "Agent-performed steps"). ``timeout_seconds``: how long the task waits for
        one before it fails ``agent_step_timeout`` (default: until it is done or cancelled)."""
        self._add(step_id, "agent", None, description=description, timeout_seconds=timeout_seconds)

    def llm(self, step_id: str, *, prompt: str, recall: dict[str, str] | None = None,
            output_schema: dict[str, Any] | None = None, max_tokens: int | None = None,
            temperature: float | None = None, timeout_seconds: int | None = None) -> None:
        """Declare an ``llm`` step: ``prompt`` (placeholders ``{{goal.x}}``, ``{{artifacts.<step>/<name>}}``,
        ``{{bundle}}``) sent to the workers' configured endpoint; its answer checked against ``output_schema``."""
        self._add(step_id, "llm", None, prompt=prompt, recall=recall, output_schema=output_schema,
                  max_tokens=max_tokens, temperature=temperature, timeout_seconds=timeout_seconds)

    def approval(self, step_id: str, *, artifact_from: str, approval_type: str | None = None,
                 summary: StepFn | None = None) -> None:
        """Wait for an approver's decision on the artifact ``"<step_id>/<artifact name>"`` names. ``summary``:
        a function whose output's ``summary`` is what the approver is asked (default: the type, version and
        artifact)."""
        self._add(step_id, "approval", summary, artifact_from=artifact_from, approval_type=approval_type)

    def publish(self, step_id: str, *, destination: str, artifact_from: str | None = None,
                files: StepFn | None = None) -> None:
        """Publish the approved artifact exactly once to ``destination``. ``files``: a function whose artifacts
        are the files the destination receives (default: the approved artifact itself); it finds the approved
        artifact's sha256 in ``ctx.extra["artifact_sha256"]``."""
        self._add(step_id, "publish", files, destination=destination, artifact_from=artifact_from)

    def definition(self) -> dict[str, Any]:
        """The body ``from_body`` takes (and ``PUT /task-definitions`` will): what a task of this type pins."""
        body: dict[str, Any] = {"version": self.version, "goal_schema": self.goal_schema,
                                "steps": [dict(step) for step in self._steps]}
        if self.redraft_step is not None:
            body["redraft_step"] = self.redraft_step
        return body

    def parsed(self) -> Definition:
        """The definition checked as the API checks it: call it in the module's own tests."""
        return runnable(from_body(self.task_type, self.definition()))

    def _add(self, step_id: str, kind: str, hook: StepFn | None, **spec: Any) -> None:
        self._steps.append({"step_id": step_id, "kind": kind,
                            **{key: value for key, value in spec.items() if value is not None}})
        if hook is not None:
            registry.declare_function(registry.hook_name(self.task_type, step_id), hook)


__all__ = ["ProducedArtifact", "StepContext", "StepFailed", "StepFn", "StepOutcome", "TaskType"]
