"""The task types mnemo itself ships, as definitions: what ``GET /task-definitions`` lists beside a tenant's own,
and what a tenant may never register. Today the monthly report, whose SDK module declares this same body."""

from __future__ import annotations

from typing import Any

from memory.tasks.builtin import MONTHLY_REPORT_V1, MONTHLY_REPORT_V1_BODY
from memory.tasks.definitions import Definition

MONTHLY_REPORT_BODY: dict[str, Any] = MONTHLY_REPORT_V1_BODY
BUILTIN: dict[str, Definition] = {MONTHLY_REPORT_V1.task_type: MONTHLY_REPORT_V1}
