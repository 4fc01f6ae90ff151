"""``monthly-report-v1`` as frozen data: what a task whose workflow input pins no definition runs.

Tasks started before definitions were pinned in the workflow input (and the recorded histories replayed by
``tests/tasks/test_replay.py``) carry no body; the workflow reads this literal copy instead, never the database
and never the registry, so such a task runs exactly the steps it started with. The monthly report's module
(``memory.reports.monthly``) declares the same body through the SDK (``tests/tasks/test_task_sdk.py`` pins it).
"""

from __future__ import annotations

from typing import Any

from memory.tasks.definitions import Definition, from_body

MONTHLY_REPORT_V1_BODY: dict[str, Any] = {
    "version": "monthly-report-v1",
    "goal_schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["month", "currency"],
        "properties": {
            "month": {"type": "string", "pattern": "^(19\\d\\d|2[01]\\d\\d)-(0[1-9]|1[0-2])$",
                      "description": "YYYY-MM, years 1900 to 2199"},
            "currency": {"type": "string", "enum": ["CNY", "USD", "EUR"], "x-mnemo-code": "unsupported_currency"},
        },
    },
    "steps": [
        {"step_id": "load_data", "kind": "compute", "function": "monthly-report.load_data"},
        {"step_id": "validate_data", "kind": "compute", "function": "monthly-report.validate_data"},
        {"step_id": "calculate_metrics", "kind": "compute", "function": "monthly-report.calculate_metrics"},
        {"step_id": "generate_charts", "kind": "compute", "function": "monthly-report.generate_charts"},
        {"step_id": "generate_draft", "kind": "compute", "function": "monthly-report.generate_draft"},
        {"step_id": "request_approval", "kind": "approval", "artifact_from": "generate_draft/draft.json",
         "approval_type": "publish"},
        {"step_id": "publish_report", "kind": "publish", "destination": "reports"},
    ],
    "redraft_step": "generate_draft",
}
MONTHLY_REPORT_V1: Definition = from_body("monthly-report", MONTHLY_REPORT_V1_BODY)
