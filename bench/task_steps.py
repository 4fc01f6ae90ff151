"""The compute functions ``bench.agent_protocol`` runs, declared with the public SDK alone, as a team's package would.

The worker of the bench's stack loads this module (``MNEMO_TASK_MODULES=bench.task_steps``); the definitions the
bench registers over REST name its functions (``bench-steps.noop``, ``bench-steps.report``): data-only definitions
whose compute steps are code a worker loaded. The type declared here is their carrier; the bench never starts it.
"""

from __future__ import annotations

import json

from memory.tasks.sdk import ProducedArtifact, StepContext, StepOutcome, TaskType

STEPS = TaskType(
    "bench-steps", "1",
    {"type": "object", "additionalProperties": False, "required": ["n"], "properties": {"n": {"type": "integer"}}},
    redraft_step="report",
)


@STEPS.compute("noop")
def noop(ctx: StepContext) -> StepOutcome:
    """No work: its cycle is the engine's cost of a compute step."""
    return StepOutcome({"n": ctx.goal["n"]})


@STEPS.compute("report")
def report(ctx: StepContext) -> StepOutcome:
    """A one-line Markdown report of the goal, distinct per task (so every task publishes its own artifact)."""
    text = f"# bench report {ctx.goal['n']}\n\n{json.dumps(ctx.goal, sort_keys=True)}\n"
    return StepOutcome({"chars": len(text)}, [ProducedArtifact("report.md", "draft", "text/markdown", text.encode())])


STEPS.approval("review", artifact_from="report/report.md")
STEPS.publish("archive", destination="archive")
