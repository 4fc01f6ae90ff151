"""``monthly-report-v1`` as frozen data: what a task whose workflow input pins no definition runs.

Tasks started before definitions were pinned in the workflow input (and the recorded histories replayed by
``tests/tasks/test_replay.py``) carry no body; the workflow reads this copy (``monthly-report-v1.json`` beside
this module, never edited) instead of the database or the registry, so such a task runs exactly the steps it
started with. The monthly report's module (``memory.reports.monthly``) declares the same body through the SDK
(``tests/tasks/test_task_sdk.py`` pins it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memory.tasks.definitions import Definition, from_body

MONTHLY_REPORT_V1_BODY: dict[str, Any] = json.loads((Path(__file__).parent / "monthly-report-v1.json").read_text())
MONTHLY_REPORT_V1: Definition = from_body("monthly-report", MONTHLY_REPORT_V1_BODY)
