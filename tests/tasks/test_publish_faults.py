"""Exactly-once publish: a timeout after storing is UNKNOWN_OUTCOME, reconciled by operation id, never resent."""

from __future__ import annotations

import json
import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text
from temporalio.exceptions import ApplicationError

from activities.stores import Publication, StoredDestination, default_destinations
from activities.tasks import TaskActivities
from activities.tasks.payloads import PublishInput
from api.settings import Settings
from memory.db import tenant_session
from tests.conftest import auth
from tests.tasks.conftest import Team, approve, publications, start_task, status_is, wait_for
from tests.workers import ThreadWorker


def _operations(engine: Engine, tenant: str, task_id: str) -> list[tuple[str, int, str | None]]:
    with tenant_session(engine, tenant) as session:
        return [
            (row.status, row.reconcile_attempts, row.resolved_by)
            for row in session.execute(
                text(
                    "SELECT status, reconcile_attempts, resolved_by FROM task_operations "
                    "WHERE task_id = :t ORDER BY created_at"
                ),
                {"t": task_id},
            )
        ]


def test_timeout_after_store_is_reconciled_without_a_second_publication(
    client: TestClient, task_worker: ThreadWorker, team: Team, settings: Settings, engine: Engine
) -> None:
    task_id = start_task(client, team.owner, destination="reports-flaky")["task_id"]
    view = wait_for(client, team.owner, task_id, status_is("WAITING_FOR_APPROVAL"))
    assert approve(client, team.approver, view).status_code == 200
    done = wait_for(client, team.owner, task_id, status_is("SUCCEEDED", "FAILED", "WAITING_FOR_OPERATOR"))
    assert done["status"] == "SUCCEEDED", done
    assert _operations(engine, team.tenant, task_id) == [("SUCCEEDED", 1, None)]
    assert len(done["publications"]) == 1
    mine = [
        p
        for p in publications(settings, engine, "reports-flaky")
        if p.publication_id == done["publications"][0]["publication_id"]
    ]
    assert len(mine) == 1
    timeline = client.get(f"/tasks/{task_id}/timeline", headers=auth(team.owner)).json()["entries"]
    reasons = [e["reason"] for e in timeline if e["kind"] == "checkpoint"]
    assert reasons[-2:] == ["unknown_outcome", "published"]


def test_a_request_that_never_arrived_is_sent_again_under_a_new_operation_id(
    client: TestClient, task_worker: ThreadWorker, team: Team, settings: Settings, engine: Engine
) -> None:
    task_id = start_task(client, team.owner, destination="reports-lossy")["task_id"]
    view = wait_for(client, team.owner, task_id, status_is("WAITING_FOR_APPROVAL"))
    assert approve(client, team.approver, view).status_code == 200
    done = wait_for(client, team.owner, task_id, status_is("SUCCEEDED", "FAILED", "WAITING_FOR_OPERATOR"))
    assert done["status"] == "SUCCEEDED", done
    # Reconciliation found nothing (definite absence): only then a second send, under a new operation id.
    assert _operations(engine, team.tenant, task_id) == [("FAILED", 1, None), ("SUCCEEDED", 0, None)]
    first, second = done["operations"]
    assert first["operation_id"] != second["operation_id"]
    stored = publications(settings, engine, "reports-lossy")
    assert [p.publication_id for p in stored if p.publication_id == second["publication_id"]] == [
        second["publication_id"]]
    timeline = client.get(f"/tasks/{task_id}/timeline", headers=auth(team.owner)).json()["entries"]
    reasons = [e["reason"] for e in timeline if e["kind"] == "checkpoint"]
    assert reasons[-3:] == ["unknown_outcome", "reconciled_absent", "published"]


def test_the_destination_stores_once_per_idempotency_key(settings: Settings, engine: Engine) -> None:
    destination = StoredDestination(f"reports-{uuid.uuid4().hex[:8]}", engine, settings.artifact_root(engine))
    first = destination.put_if_absent("publish:t:h:reports", "op-1", {"a.txt": b"one"}, {})
    again = destination.put_if_absent("publish:t:h:reports", "op-2", {"a.txt": b"two"}, {})
    other = destination.put_if_absent("publish:t:h2:reports", "op-3", {"a.txt": b"three"}, {})
    assert (first.created, again.created, other.created) == (True, False, True)
    assert again.publication_id == first.publication_id and again.operation_id == "op-1"
    [published, _] = sorted(destination.all_publications(), key=lambda p: p.publication_id != first.publication_id)
    assert destination.read(published, "a.txt") == b"one" and published.operation_id == "op-1"
    assert (
        destination.lookup("op-2")
        == destination.lookup("op-1")
        == Publication(first.publication_id, first.location, "op-1", False)
    )
    assert destination.lookup("op-never-sent") is None
    assert len(destination.all_publications()) == 2


def test_still_unknown_waits_for_an_operator(
    client: TestClient, task_worker: ThreadWorker, team: Team, settings: Settings, engine: Engine
) -> None:
    task_id = start_task(client, team.owner, destination="reports-unreachable")["task_id"]
    view = wait_for(client, team.owner, task_id, status_is("WAITING_FOR_APPROVAL"))
    assert approve(client, team.approver, view).status_code == 200
    stuck = wait_for(client, team.owner, task_id, status_is("WAITING_FOR_OPERATOR", "SUCCEEDED", "FAILED"), timeout=90)
    assert stuck["status"] == "WAITING_FOR_OPERATOR" and stuck["waiting_reason"] == "OPERATOR"
    assert stuck["publications"] == []
    [operation] = stuck["operations"]
    assert operation["status"] == "UNKNOWN_OUTCOME"
    assert _operations(engine, team.tenant, task_id) == [("UNKNOWN_OUTCOME", 3, None)]

    cancel = client.post(f"/tasks/{task_id}/cancel", headers=auth(team.owner))
    assert (cancel.status_code, cancel.json()["error"]["code"]) == (409, "operation_unresolved")
    url = f"/tasks/{task_id}/operations/{operation['operation_id']}/resolve"
    body = {"outcome": "published", "note": "checked the report portal: it is there"}
    assert client.post(url, json=body, headers=auth(team.owner)).status_code == 403
    wrong = client.post(f"/tasks/{task_id}/operations/{uuid.uuid4()}/resolve", json=body, headers=auth(team.operator))
    assert (wrong.status_code, wrong.json()["error"]["code"]) == (409, "unknown_operation")
    resolved = client.post(url, json=body, headers=auth(team.operator))
    assert resolved.status_code == 200, resolved.text

    done = wait_for(client, team.owner, task_id, status_is("SUCCEEDED", "FAILED"))
    assert done["status"] == "SUCCEEDED"
    assert _operations(engine, team.tenant, task_id) == [("SUCCEEDED", 3, "olga")]
    stored = publications(settings, engine, "reports-unreachable")
    assert sum(1 for p in stored if json.dumps(p.metadata).count(task_id)) == 1


def test_publish_refuses_without_an_approval(
    client: TestClient, task_worker: ThreadWorker, team: Team, settings: Settings, engine: Engine, tmp_path: object
) -> None:
    """The TOCTOU re-check inside the side-effect activity: no APPROVED approval, no publication."""
    task_id = start_task(client, team.owner)["task_id"]
    view = wait_for(client, team.owner, task_id, status_is("WAITING_FOR_APPROVAL"))
    store = settings.artifact_root(engine)
    activities = TaskActivities(engine, store, destinations=default_destinations(engine, store))
    before = publications(settings, engine)
    with pytest.raises(ApplicationError) as refused:
        activities.publish(
            PublishInput(
                team.tenant,
                task_id,
                "monthly-report",
                view["goal"],
                str(uuid.uuid4()),
                view["draft_sha256"],
                view["pending_approval"]["approval_id"],
                "reports",
                view["state_version"],
            )
        )
    assert refused.value.type == "publish_refused"
    assert "the approval is PENDING" in refused.value.message
    assert publications(settings, engine) == before
    assert _operations(engine, team.tenant, task_id) == []


def test_an_unknown_destination_fails_the_task_with_a_reason(
    client: TestClient, task_worker: ThreadWorker, team: Team
) -> None:
    task_id = start_task(client, team.owner, destination="nowhere")["task_id"]
    failed = wait_for(client, team.owner, task_id, status_is("FAILED", "WAITING_FOR_APPROVAL"))
    assert failed["status"] == "FAILED"
    assert failed["error"]["code"] == "unknown_destination"
