"""The monthly sales report (seed 003 §14), declared on the public SDK alone (:mod:`memory.tasks.sdk`).

Registered through mnemo's own ``mnemo.tasks`` entry point and :data:`memory.tasks.registry.BUILTIN_MODULES`.
Its body is ``monthly-report-v1``, the same data as :mod:`memory.tasks.builtin` (which older tasks run).
"""

from __future__ import annotations

from memory.reports import MONTHLY_REPORT
from memory.reports.monthly.charts import generate_charts
from memory.reports.monthly.data import load_data, validate_data
from memory.reports.monthly.draft import generate_draft, publish_report, request_approval
from memory.reports.monthly.metrics import calculate_metrics
from memory.reports.sales import RATES_TO_CNY
from memory.tasks.sdk import TaskType

MONTHLY = TaskType(
    MONTHLY_REPORT,
    "monthly-report-v1",
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["month", "currency"],
        "properties": {
            "month": {"type": "string", "pattern": "^(19\\d\\d|2[01]\\d\\d)-(0[1-9]|1[0-2])$",
                      "description": "YYYY-MM, years 1900 to 2199"},
            "currency": {"type": "string", "enum": list(RATES_TO_CNY), "x-mnemo-code": "unsupported_currency"},
        },
    },
    redraft_step="generate_draft",
)
for step in (load_data, validate_data, calculate_metrics, generate_charts, generate_draft):
    MONTHLY.compute(step.__name__)(step)
MONTHLY.approval("request_approval", artifact_from="generate_draft/draft.json", approval_type="publish",
                 summary=request_approval)
MONTHLY.publish("publish_report", destination="reports", files=publish_report)
