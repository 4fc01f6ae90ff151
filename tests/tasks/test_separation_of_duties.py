"""Separation of duties: a report's owner may not approve their own draft, unless the tenant allows it.

Issue 12, finding 5: the owner of a report who also held ``approver`` approved their own draft and
it published. The policy is on by default (``memory.store.policies``); an admin may turn it off, and the
change is audited and applies to the very next decision.
"""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from memory.db import tenant_session
from memory.models import AuditEntry
from tests.conftest import MakeKey, auth
from tests.tasks.conftest import Team, approve, start_task, status_is, wait_for
from tests.workers import ThreadWorker


def test_the_owner_cannot_approve_their_own_draft_by_default(
    client: TestClient, task_worker: ThreadWorker, team: Team, make_key: MakeKey, engine: Engine
) -> None:
    owner = make_key(tenant=team.tenant, user="dora", roles=("memory_writer", "approver"))
    admin = make_key(tenant=team.tenant, user="root", roles=("admin",))
    assert client.get("/tenant-policy", headers=auth(owner)).json() == {"separation_of_duties": True}

    task = start_task(client, owner)
    view = wait_for(client, owner, task["task_id"], status_is("WAITING_FOR_APPROVAL", "FAILED"))
    assert view["status"] == "WAITING_FOR_APPROVAL", view
    refused = approve(client, owner, view)
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "separation_of_duties"
    again = client.get(f"/tasks/{task['task_id']}", headers=auth(owner)).json()
    assert again["status"] == "WAITING_FOR_APPROVAL" and again["state_version"] == view["state_version"]
    rejected = approve(client, owner, view, decision="reject", reason="I would rather reject it myself")
    assert rejected.status_code == 403 and rejected.json()["error"]["code"] == "separation_of_duties"

    # Only an admin changes the policy; the change applies to the next decision.
    member = client.put("/tenant-policy", json={"separation_of_duties": False}, headers=auth(owner))
    assert member.status_code == 403, member.text
    changed = client.put("/tenant-policy", json={"separation_of_duties": False}, headers=auth(admin))
    assert changed.status_code == 200 and changed.json() == {"separation_of_duties": False}
    assert client.put("/tenant-policy", json={"separation_of_duties": "no"}, headers=auth(admin)).status_code == 422
    approved = approve(client, owner, view)
    assert approved.status_code == 200, approved.text
    done = wait_for(client, owner, task["task_id"], status_is("SUCCEEDED", "FAILED"))
    assert done["status"] == "SUCCEEDED", done
    with tenant_session(engine, team.tenant) as session:
        [entry] = session.execute(
            select(AuditEntry).where(AuditEntry.action == "TENANT_POLICY_CHANGED")
        ).scalars().all()
    assert entry.actor == "root"
    assert entry.detail["before"] == {"separation_of_duties": True}
    assert entry.detail["after"] == {"separation_of_duties": False}


def test_another_approver_still_approves(client: TestClient, task_worker: ThreadWorker, team: Team) -> None:
    task = start_task(client, team.owner)
    view = wait_for(client, team.owner, task["task_id"], status_is("WAITING_FOR_APPROVAL", "FAILED"))
    assert approve(client, team.approver, view).status_code == 200
    assert wait_for(client, team.owner, task["task_id"], status_is("SUCCEEDED", "FAILED"))["status"] == "SUCCEEDED"


def test_a_replay_is_authorised_like_the_decision_it_repeats(
    client: TestClient, task_worker: ThreadWorker, team: Team, make_key: MakeKey
) -> None:
    """Issue 23, finding 8: the owner (an approver too) resent the approver's decision and got 200 "replayed"
    instead of the 403 the decision itself would get; who may decide is judged before any replay lookup."""
    owner = make_key(tenant=team.tenant, user="dora", roles=("memory_writer", "approver"))
    colleague = make_key(tenant=team.tenant, user="erin", roles=("approver",))
    task = start_task(client, owner)
    view = wait_for(client, owner, task["task_id"], status_is("WAITING_FOR_APPROVAL", "FAILED"))
    assert view["status"] == "WAITING_FOR_APPROVAL", view
    reason = {"decision": "reject", "reason": "the totals need a second look"}
    first = approve(client, team.approver, view, **reason)
    assert first.status_code == 200 and first.json()["replayed"] is False, first.text

    by_owner = approve(client, owner, view, **reason)
    assert by_owner.status_code == 403, by_owner.text
    assert by_owner.json()["error"]["code"] == "separation_of_duties"
    by_other = approve(client, colleague, view, **reason)  # not theirs to replay: the task moved on since
    assert by_other.status_code == 409, by_other.text
    assert by_other.json()["error"]["code"] in ("not_waiting_for_approval", "stale_artifact", "version_conflict")
    no_role = approve(client, team.owner, view, **reason)
    assert no_role.status_code == 403, no_role.text

    again = approve(client, team.approver, view, **reason)
    assert again.status_code == 200, again.text
    assert again.json() == {**first.json(), "replayed": True}
