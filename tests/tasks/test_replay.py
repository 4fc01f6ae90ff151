"""The current workflow code replays a history recorded from a real run (reject → redraft → approve →
publish timeout → UNKNOWN_OUTCOME → reconciled). A change that breaks determinism fails here;
such changes must go through ``workflow.patched``."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from workflows.report_task import ReportTaskWorkflow

HISTORY = Path(__file__).parent / "histories" / "monthly-report-v1.json"


async def test_the_recorded_history_replays_on_the_current_code() -> None:
    raw = json.loads(HISTORY.read_text())
    events = raw["events"]
    kinds = [event["eventType"] for event in events]
    assert kinds[0] == "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED"
    assert kinds[-1] == "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED"
    assert kinds.count("EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED") == 2  # reject, then approve
    history = WorkflowHistory.from_json("task-replay", raw)
    result = await Replayer(workflows=[ReportTaskWorkflow]).replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None
    activities = [
        e["activityTaskScheduledEventAttributes"]["activityType"]["name"]
        for e in events
        if e["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"
    ]
    assert activities.count("task_run_step") == 6  # five steps, then the draft again after the rejection
    assert activities.count("task_publish") == 1 and activities.count("task_reconcile") == 1
