"""The report task end to end through the API, on the real worker, Postgres and Temporal dev server."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal

from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from activities.stores import StoredDestination
from api.settings import Settings
from memory.db import tenant_session
from memory.reports.sales import RATES_TO_CNY, generate_lines
from tests.conftest import MakeKey, auth
from tests.tasks.conftest import (
    SMALL_DATASET,
    Team,
    approve,
    publications,
    start_task,
    status_is,
    wait_for,
)
from tests.workers import ThreadWorker

STEPS = ["load_data", "validate_data", "calculate_metrics", "generate_charts", "generate_draft"]


def _expected_revenue(month: str, currency: str) -> str:
    """Computed here from the generator, independently of the steps."""
    total = Decimal(0)
    for line in generate_lines(SMALL_DATASET):
        if line.order_date.strftime("%Y-%m") != month:
            continue
        if line.quantity <= 0 or line.region is None or line.unit_price is None or line.currency not in RATES_TO_CNY:
            continue
        total += line.quantity * line.unit_price * RATES_TO_CNY[line.currency] / RATES_TO_CNY[currency]
    return str(total.quantize(Decimal("0.01")))


def test_report_runs_to_approval_then_publishes_exactly_once(
    client: TestClient, task_worker: ThreadWorker, team: Team, settings: Settings, engine: Engine
) -> None:
    created = start_task(client, team.owner, intent="june-report", goal={"month": "2026-06", "currency": "USD"})
    assert set(created) >= {"task_id", "status", "state_version"}
    task_id = created["task_id"]

    view = wait_for(client, team.owner, task_id, status_is("WAITING_FOR_APPROVAL", "FAILED"))
    assert view["status"] == "WAITING_FOR_APPROVAL", view
    assert view["completed_step_ids"] == STEPS
    assert view["current_step_id"] == "request_approval"
    assert view["workflow_version"] == "monthly-report-v1"
    draft_sha = view["pending_approval"]["artifact_sha256"]
    assert draft_sha == view["draft_sha256"]
    assert view["publications"] == []

    # The artifacts are real: a manifest binding Markdown, HTML and PNG charts, and numbers that add up.
    manifest = client.get(f"/tasks/{task_id}/artifacts/{draft_sha}", headers=auth(team.owner)).json()
    html = client.get(f"/tasks/{task_id}/artifacts/{manifest['html_sha256']}", headers=auth(team.owner))
    markdown = client.get(f"/tasks/{task_id}/artifacts/{manifest['markdown_sha256']}", headers=auth(team.owner)).text
    metrics = client.get(f"/tasks/{task_id}/artifacts/{manifest['metrics_sha256']}", headers=auth(team.owner)).json()
    for sha in manifest["charts"].values():
        chart = client.get(f"/tasks/{task_id}/artifacts/{sha}", headers=auth(team.owner))
        assert chart.headers["content-type"] == "image/png"
        assert chart.content.startswith(b"\x89PNG\r\n\x1a\n")
    assert html.headers["content-type"].startswith("text/html")
    assert html.text.count("data:image/png;base64,") == 3
    assert metrics["currency"] == "USD"
    assert metrics["revenue"] == _expected_revenue("2026-06", "USD")
    assert f"**{Decimal(metrics['revenue']):,.2f} USD**" in markdown
    assert f"{Decimal(metrics['revenue']):,.2f} USD" in html.text
    assert metrics["previous_month"] == "2026-05"
    assert metrics["growth"] == round(
        float(
            (Decimal(metrics["revenue"]) - Decimal(metrics["previous_revenue"])) / Decimal(metrics["previous_revenue"])
        ),
        4,
    )

    # Duplicate create: the same task, not a second one; another goal under the same intent is refused.
    again = client.post(
        "/tasks",
        json={
            "task_type": "monthly-report",
            "request_intent_id": "june-report",
            "goal": {"month": "2026-06", "currency": "USD"},
        },
        headers=auth(team.owner),
    )
    assert again.status_code == 200 and again.json()["task_id"] == task_id and again.json()["replayed"] is True
    clash = client.post(
        "/tasks",
        json={
            "task_type": "monthly-report",
            "request_intent_id": "june-report",
            "goal": {"month": "2026-05", "currency": "USD"},
        },
        headers=auth(team.owner),
    )
    assert clash.status_code == 409 and clash.json()["error"]["code"] == "idempotency_conflict"

    # Approvals the validator must refuse: none of them changes anything.
    assert approve(client, team.owner, view).status_code == 403
    stale = approve(client, team.approver, view, artifact_sha256="0" * 64)
    assert (stale.status_code, stale.json()["error"]["code"]) == (409, "stale_artifact")
    old_version = approve(client, team.approver, view, state_version=view["state_version"] - 1)
    assert (old_version.status_code, old_version.json()["error"]["code"]) == (409, "version_conflict")
    no_reason = client.post(
        f"/tasks/{task_id}/approvals",
        json={"decision": "reject", "artifact_sha256": draft_sha, "state_version": view["state_version"]},
        headers=auth(team.approver),
    )
    assert no_reason.status_code == 422
    assert (
        wait_for(client, team.owner, task_id, status_is("WAITING_FOR_APPROVAL"))["state_version"]
        == view["state_version"]
    )

    first = approve(client, team.approver, view)
    assert first.status_code == 200, first.text
    assert first.json()["replayed"] is False
    twice = approve(client, team.approver, view)
    assert twice.status_code == 200 and twice.json()["replayed"] is True
    assert twice.json()["approval_id"] == first.json()["approval_id"]

    done = wait_for(client, team.owner, task_id, status_is("SUCCEEDED", "FAILED"))
    assert done["status"] == "SUCCEEDED", done
    assert len(done["publications"]) == 1
    [published] = [p for p in publications(settings, engine)
                   if p.publication_id == done["publications"][0]["publication_id"]]
    destination = StoredDestination("reports", engine, settings.artifact_root(engine))
    assert destination.read(published, "report.html") == html.content
    assert published.metadata["artifact_sha256"] == draft_sha
    late = approve(client, team.approver, view)
    assert late.status_code in (200, 409)  # a replay of the recorded decision, or the task already closed
    with tenant_session(engine, team.tenant) as session:
        counts = session.execute(
            text(
                "SELECT (SELECT count(*) FROM task_operations WHERE task_id = :t AND status = 'SUCCEEDED'),"
                " (SELECT count(*) FROM task_approvals WHERE task_id = :t),"
                " (SELECT count(*) FROM task_artifacts WHERE task_id = :t),"
                " (SELECT count(*) FROM task_checkpoints WHERE task_id = :t)"
            ),
            {"t": task_id},
        ).one()
    assert counts[0] == 1 and counts[1] == 1
    assert counts[2] == 10  # data, clean, rejected, metrics, 3 charts, md, html, manifest
    assert counts[3] == 9

    timeline = client.get(f"/tasks/{task_id}/timeline", headers=auth(team.owner)).json()
    assert timeline["workflow_id"] == f"task-{team.tenant}-{task_id}" and timeline["run_id"]
    kinds = {entry["kind"] for entry in timeline["entries"]}
    assert kinds == {"attempt", "checkpoint", "approval", "operation"}
    attempts = [e for e in timeline["entries"] if e["kind"] == "attempt"]
    assert [a["step_id"] for a in attempts] == STEPS and all(a["status"] == "SUCCEEDED" for a in attempts)
    assert all(a["input_digest"].startswith("sha256:") and a["output_digest"] for a in attempts)
    checkpoints = [e for e in timeline["entries"] if e["kind"] == "checkpoint"]
    (approval,) = [e for e in timeline["entries"] if e["kind"] == "approval"]
    # stamped when it was decided (after the wait began), not when it was requested (issue 24, item 10)
    waited = next(c for c in checkpoints if c["reason"] == "waiting_for_approval")
    at = {name: datetime.fromisoformat(approval[name]) for name in ("at", "requested_at", "decided_at")}
    assert at["at"] == at["decided_at"] > at["requested_at"], approval
    assert at["at"] > datetime.fromisoformat(waited["at"]), timeline["entries"]
    assert [c["reason"] for c in checkpoints] == [
        "created",
        *[f"step_succeeded:{step}" for step in STEPS],
        "waiting_for_approval",
        "approval_result",
        "published",
    ]
    assert checkpoints[-1]["state_version"] == done["state_version"]
    assert len({c["state_version"] for c in checkpoints}) == len(checkpoints)


def test_rejection_regenerates_the_draft_and_invalidates_the_old_hash(
    client: TestClient, task_worker: ThreadWorker, team: Team, settings: Settings, engine: Engine
) -> None:
    task_id = start_task(client, team.owner)["task_id"]
    first = wait_for(client, team.owner, task_id, status_is("WAITING_FOR_APPROVAL"))
    rejected = approve(client, team.approver, first, decision="reject", reason="Add the EUR share to the summary")
    assert rejected.status_code == 200, rejected.text

    second = wait_for(
        client,
        team.owner,
        task_id,
        lambda v: v["status"] == "WAITING_FOR_APPROVAL" and v["draft_sha256"] != first["draft_sha256"],
    )
    manifest = client.get(f"/tasks/{task_id}/artifacts/{second['draft_sha256']}", headers=auth(team.owner)).json()
    assert manifest["revision"] == 2
    markdown = client.get(f"/tasks/{task_id}/artifacts/{manifest['markdown_sha256']}", headers=auth(team.owner)).text
    assert "Add the EUR share to the summary" in markdown

    # Approving what the approver saw before the change is refused: the approval is bound to the old hash.
    stale = approve(client, team.approver, first, state_version=second["state_version"])
    assert (stale.status_code, stale.json()["error"]["code"]) == (409, "stale_artifact")
    assert approve(client, team.approver, second).status_code == 200
    done = wait_for(client, team.owner, task_id, status_is("SUCCEEDED", "FAILED"))
    assert done["status"] == "SUCCEEDED"
    timeline = client.get(f"/tasks/{task_id}/timeline", headers=auth(team.owner)).json()["entries"]
    approvals = {e["artifact_sha256"]: e["status"] for e in timeline if e["kind"] == "approval"}
    assert approvals == {first["draft_sha256"]: "REJECTED", second["draft_sha256"]: "APPROVED"}
    drafts = [e for e in timeline if e["kind"] == "attempt" and e["step_id"] == "generate_draft"]
    assert [d["input_version"] for d in drafts] == ["v1", "r2"]
    published = [p for p in publications(settings, engine)
                 if p.publication_id == done["publications"][0]["publication_id"]]
    assert len(published) == 1
    assert published[0].metadata["artifact_sha256"] == second["draft_sha256"]


def test_cancel_while_waiting_for_approval_publishes_nothing(
    client: TestClient, task_worker: ThreadWorker, team: Team, engine: Engine
) -> None:
    task_id = start_task(client, team.owner)["task_id"]
    view = wait_for(client, team.owner, task_id, status_is("WAITING_FOR_APPROVAL"))
    # A colleague who cannot see the task hears a missing one (issue 12, finding 11; it was a 403).
    assert client.post(f"/tasks/{task_id}/cancel", headers=auth(team.other_user)).status_code == 404
    cancelled = client.post(f"/tasks/{task_id}/cancel", json={"reason": "not needed"}, headers=auth(team.owner))
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "CANCELLED"
    closed = client.get(f"/tasks/{task_id}", headers=auth(team.owner)).json()
    assert closed["status"] == "CANCELLED" and closed["source"] == "read_model"
    assert closed["pending_approval"] is None and closed["publications"] == []
    late = approve(client, team.approver, view)
    assert (late.status_code, late.json()["error"]["code"]) == (409, "task_closed")
    with tenant_session(engine, team.tenant) as session:
        rows = (
            session.execute(
                text(
                    "SELECT status FROM task_approvals WHERE task_id = :t "
                    "UNION ALL SELECT status FROM task_operations WHERE task_id = :t"
                ),
                {"t": task_id},
            )
            .scalars()
            .all()
        )
    assert rows == ["CANCELLED"]


def test_another_tenants_task_is_the_same_404_as_a_missing_one(
    client: TestClient, task_worker: ThreadWorker, team: Team, make_key: MakeKey
) -> None:
    task_id = start_task(client, team.owner)["task_id"]
    view = wait_for(client, team.owner, task_id, status_is("WAITING_FOR_APPROVAL"))
    stranger = make_key(roles=("approver", "operator"))
    missing = str(uuid.uuid4())
    for path in ("", "/timeline", f"/artifacts/{view['draft_sha256']}"):
        theirs = client.get(f"/tasks/{task_id}{path}", headers=auth(stranger))
        nothing = client.get(f"/tasks/{missing}{path}", headers=auth(stranger))
        assert theirs.status_code == nothing.status_code == 404
        assert theirs.json()["error"]["code"] == nothing.json()["error"]["code"] == "not_found"
    assert approve(client, stranger, view).status_code == 404
    assert client.post(f"/tasks/{task_id}/cancel", headers=auth(stranger)).status_code == 404
    assert client.get("/tasks?owner=all", headers=auth(stranger)).json()["items"] == []
    assert (
        wait_for(client, team.owner, task_id, status_is("WAITING_FOR_APPROVAL"))["state_version"]
        == view["state_version"]
    )


def test_a_colleague_without_a_reading_role_cannot_read_my_task(
    client: TestClient, task_worker: ThreadWorker, team: Team
) -> None:
    task_id = start_task(client, team.owner)["task_id"]
    view = wait_for(client, team.owner, task_id, status_is("WAITING_FOR_APPROVAL"))
    for path in ("", "/timeline", f"/artifacts/{view['draft_sha256']}"):
        assert client.get(f"/tasks/{task_id}{path}", headers=auth(team.other_user)).status_code == 404, path
        assert client.get(f"/tasks/{task_id}{path}", headers=auth(team.approver)).status_code == 200, path


def test_a_new_session_resumes_the_right_task(
    client: TestClient, task_worker: ThreadWorker, team: Team, make_key: MakeKey
) -> None:
    mine = start_task(client, team.owner, intent="report-june")["task_id"]
    theirs = start_task(client, team.other_user, intent="report-june")["task_id"]
    assert mine != theirs  # same intent id, different users: different tasks
    wait_for(client, team.owner, mine, status_is("WAITING_FOR_APPROVAL"))
    wait_for(client, team.other_user, theirs, status_is("WAITING_FOR_APPROVAL"))

    new_session = make_key(tenant=team.tenant, user="alice", roles=("memory_writer",))
    found = client.get("/tasks?status=WAITING_FOR_APPROVAL", headers=auth(new_session)).json()["items"]
    assert [item["task_id"] for item in found] == [mine]
    resumed = client.get(f"/tasks/{found[0]['task_id']}", headers=auth(new_session)).json()
    assert resumed["goal"] == {"month": "2026-06", "currency": "CNY"}
    assert resumed["pending_approval"]["artifact_sha256"] == resumed["draft_sha256"]
    # Re-sending the original request from the new session names the same task.
    assert (
        start_task.__name__
        and client.post(
            "/tasks",
            json={
                "task_type": "monthly-report",
                "request_intent_id": "report-june",
                "goal": {"month": "2026-06", "currency": "CNY"},
            },
            headers=auth(new_session),
        ).json()["task_id"]
        == mine
    )
    assert client.get("/tasks?owner=all", headers=auth(new_session)).status_code == 403
    everyone = client.get("/tasks?owner=all", headers=auth(team.approver)).json()["items"]
    assert {item["task_id"] for item in everyone} == {mine, theirs}


def test_pause_holds_the_task_between_steps_until_resumed(
    client: TestClient, task_worker: ThreadWorker, team: Team
) -> None:
    task_id = start_task(client, team.owner)["task_id"]
    paused = client.post(f"/tasks/{task_id}/pause", headers=auth(team.owner))
    assert paused.status_code == 200, paused.text
    view = wait_for(client, team.owner, task_id, status_is("PAUSED"))
    assert view["waiting_reason"] == "PAUSED"
    assert len(view["completed_step_ids"]) < len(STEPS)
    held = view["state_version"]
    again = wait_for(client, team.owner, task_id, status_is("PAUSED"))
    assert again["state_version"] == held and again["completed_step_ids"] == view["completed_step_ids"]
    twice = client.post(f"/tasks/{task_id}/pause", headers=auth(team.owner))
    assert (twice.status_code, twice.json()["error"]["code"]) == (409, "illegal_transition")
    assert client.post(f"/tasks/{task_id}/resume", headers=auth(team.operator)).status_code == 200
    done = wait_for(client, team.owner, task_id, status_is("WAITING_FOR_APPROVAL", "FAILED"))
    assert done["status"] == "WAITING_FOR_APPROVAL" and done["completed_step_ids"] == STEPS
    timeline = client.get(f"/tasks/{task_id}/timeline", headers=auth(team.owner)).json()["entries"]
    reasons = [e["reason"] for e in timeline if e["kind"] == "checkpoint"]
    assert reasons.index("paused") < reasons.index("resumed") < reasons.index("waiting_for_approval")


def test_strict_requests(client: TestClient, task_worker: ThreadWorker, team: Team) -> None:
    base = {"task_type": "monthly-report", "request_intent_id": "x", "goal": {"month": "2026-06", "currency": "CNY"}}
    cases = [
        ({**base, "tenant_id": "other"}, "identity_from_credentials"),
        ({**base, "extra": 1}, "unknown_field"),
        ({**base, "goal": {"month": "2026-13", "currency": "CNY"}}, "invalid_value"),
        ({**base, "goal": {"month": "2026-06", "currency": "JPY"}}, "unsupported_currency"),
        ({**base, "goal": {"month": "2026-06", "currency": "CNY", "format": "md"}}, "unknown_field"),
        ({**base, "task_type": "weekly"}, "invalid_value"),
    ]
    for body, code in cases:
        response = client.post("/tasks", json=body, headers=auth(team.owner))
        assert (response.status_code, response.json()["error"]["code"]) == (422, code), (body, response.text)
    assert client.get("/tasks/not-a-task", headers=auth(team.owner)).status_code == 404
