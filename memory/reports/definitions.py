"""Report definitions: plain data the workflow reads (no I/O, safe to import in the sandbox)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory.tasks.definitions import Definition, from_body


@dataclass(frozen=True)
class StepSpec:
    """``compute`` steps run through the generic step activity; ``approval`` and ``publish``
    steps run the engine's approval wait and exactly-once publish around their implementation."""

    step_id: str
    kind: str = "compute"


@dataclass(frozen=True)
class ReportDefinition:
    task_type: str
    version: str
    steps: tuple[StepSpec, ...]
    redraft_step: str
    """The step re-run (with the reviewer's reason) when an approver rejects the draft."""
    currencies: tuple[str, ...]

    def step_ids(self) -> list[str]:
        return [step.step_id for step in self.steps]


MONTHLY_REPORT = ReportDefinition(
    task_type="monthly-report",
    version="monthly-report-v1",
    steps=(
        StepSpec("load_data"),
        StepSpec("validate_data"),
        StepSpec("calculate_metrics"),
        StepSpec("generate_charts"),
        StepSpec("generate_draft"),
        StepSpec("request_approval", "approval"),
        StepSpec("publish_report", "publish"),
    ),
    redraft_step="generate_draft",
    currencies=("CNY", "USD", "EUR"),
)

DEFINITIONS: dict[str, ReportDefinition] = {MONTHLY_REPORT.task_type: MONTHLY_REPORT}

MONTHLY_REPORT_BODY: dict[str, Any] = {
    "version": MONTHLY_REPORT.version,
    "goal_schema": {
        "type": "object",
        "properties": {
            "month": {"type": "string", "pattern": r"^(19\d\d|2[01]\d\d)-(0[1-9]|1[0-2])$",
                      "description": "YYYY-MM, years 1900 to 2199"},
            "currency": {"type": "string", "enum": list(MONTHLY_REPORT.currencies),
                         "x-mnemo-code": "unsupported_currency"},
        },
        "required": ["month", "currency"],
        "additionalProperties": False,
    },
    "steps": [
        *({"step_id": step.step_id, "kind": "compute", "function": f"monthly_report.{step.step_id}"}
          for step in MONTHLY_REPORT.steps if step.kind == "compute"),
        {"step_id": "request_approval", "kind": "approval", "artifact_from": "generate_draft/draft.json",
         "approval_type": "publish", "deadline_seconds": 3 * 86_400, "reminder_every_seconds": 86_400},
        {"step_id": "publish_report", "kind": "publish", "destination": "reports"},
    ],
    "redraft_step": MONTHLY_REPORT.redraft_step,
}
"""The monthly report as a definition's body: what ``GET /task-definitions`` shows of the built-in type."""

BUILTIN: dict[str, Definition] = {MONTHLY_REPORT.task_type: from_body(MONTHLY_REPORT.task_type, MONTHLY_REPORT_BODY)}
"""The task types mnemo itself defines: listed beside a tenant's own, and never registered by a tenant."""
