"""The current workflow code replays a history recorded from a task running a pinned definition (a data-only
type: compute → approval, rejected once and redrafted → publish; ``histories/record_generic.py`` records it)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from workflows.report_task import ReportTaskWorkflow
from workflows.task_support import DEFINITIONS_PATCH

HISTORY = Path(__file__).parent / "histories" / "data-only-v1.json"


async def test_the_recorded_generic_history_replays_on_the_current_code() -> None:
    raw = json.loads(HISTORY.read_text())
    events = raw["events"]
    assert events[-1]["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED"
    started = events[0]["workflowExecutionStartedEventAttributes"]["input"]["payloads"][0]["data"]
    assert json.loads(base64.b64decode(started))["definition"]["version"] == "data-only-v1"  # pinned in the input
    patches = [json.loads(base64.b64decode(e["markerRecordedEventAttributes"]["details"]["patch-data"]["payloads"][0]
                                           ["data"]))["id"]
               for e in events if e["eventType"] == "EVENT_TYPE_MARKER_RECORDED"]
    assert DEFINITIONS_PATCH in patches
    history = WorkflowHistory.from_json("generic-replay", raw)
    result = await Replayer(workflows=[ReportTaskWorkflow]).replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None
    activities = [
        e["activityTaskScheduledEventAttributes"]["activityType"]["name"]
        for e in events
        if e["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"
    ]
    assert activities.count("task_run_step") == 2  # the draft, then again after the rejection
    assert activities.count("task_request_approval") == 2 and activities.count("task_publish") == 1
