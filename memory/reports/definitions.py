"""Report definitions: plain data the workflow reads (no I/O, safe to import in the sandbox)."""

from __future__ import annotations

from dataclasses import dataclass


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
