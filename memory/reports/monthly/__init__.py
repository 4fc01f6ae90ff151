"""The monthly sales report (seed 003 §14): its seven steps, by step id."""

from __future__ import annotations

from memory.reports.monthly.charts import generate_charts
from memory.reports.monthly.data import load_data, validate_data
from memory.reports.monthly.draft import generate_draft, publish_report, request_approval
from memory.reports.monthly.metrics import calculate_metrics
from memory.tasks.contract import StepFn

STEPS: dict[str, StepFn] = {
    "load_data": load_data,
    "validate_data": validate_data,
    "calculate_metrics": calculate_metrics,
    "generate_charts": generate_charts,
    "generate_draft": generate_draft,
    "request_approval": request_approval,
    "publish_report": publish_report,
}
