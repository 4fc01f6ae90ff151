"""A finished task proposes knowledge: the ``knowledge`` object of its approved, published JSON artifact becomes a
candidate (origin TASK, at most P2 however much it claims, resting on the task and the exact artifact), once."""

from __future__ import annotations

import hashlib
import json
import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from memory.db import tenant_session
from memory.knowledge.models import KnowledgeCandidate, KnowledgeItem
from memory.models import AuditEntry
from tests.conftest import MakeKey
from tests.tasks.conftest import status_is, wait_for
from tests.tasks.test_agent_steps_run import RestAgent, Tenant, decide, register, start, waiting_for_agent

pytestmark = pytest.mark.usefixtures("task_worker")

INCIDENTS: dict[str, object] = {
    "version": "1",
    "goal_schema": {"type": "object", "required": ["service"], "properties": {"service": {"type": "string"}}},
    "steps": [
        {"step_id": "collect", "kind": "agent", "description": "the incident, as JSON"},
        {"step_id": "review", "kind": "approval", "artifact_from": "collect/incident.json"},
        {"step_id": "send", "kind": "publish", "destination": "archive"},
    ],
    "redraft_step": "collect",
}
INCIDENT = {"kind": "incident", "symptom": "TLS handshakes to the gateway fail",
            "root_cause": "the intermediate certificate was missing", "fix": "install the full certificate chain",
            "verification": "openssl s_client shows the complete chain",
            "attempts": [{"action": "restart the gateway", "outcome": "failed"},
                         {"action": "install the full chain", "outcome": "fixed"}]}


def test_a_published_incident_is_proposed_once_at_most_p2(client: TestClient, make_key: MakeKey,
                                                          engine: Engine) -> None:
    name = f"t-{uuid.uuid4().hex[:12]}"
    tenant = Tenant(make_key(tenant=name, user="root", roles=("admin",)),
                    make_key(tenant=name, user="alice", roles=("memory_writer",)),
                    make_key(tenant=name, user="bob", roles=("approver",)))
    register(client, tenant.admin, "incident-writeup", INCIDENTS)
    task_id = start(client, tenant.owner, "incident-writeup", {"service": "gateway"})
    waiting_for_agent(client, tenant.owner, task_id)
    agent = RestAgent(client, tenant.owner, task_id)
    claimed = agent.claim()
    body = {"summary": "gateway TLS outage", "knowledge": [
        {"authority": "P0", "structured": INCIDENT, "source_refs": ["ticket:INC-42"],
         "evidence": [{"quote": "on-call: 13800138000"}]},
        {"authority": "P1"}]}  # the second names no claim and no source: refused by its code, not fatal
    content = json.dumps(body).encode()
    agent.complete(claimed["attempt_id"], "incident.json", content, "application/json")
    view = wait_for(client, tenant.owner, task_id, status_is("WAITING_FOR_APPROVAL"))
    decide(client, tenant.approver, view, "approve")
    view = wait_for(client, tenant.owner, task_id, status_is("SUCCEEDED", "FAILED"))
    assert view["status"] == "SUCCEEDED", view

    with tenant_session(engine, name) as session:
        [candidate] = session.execute(select(KnowledgeCandidate)).scalars().all()
        audit = session.execute(select(AuditEntry.detail).where(
            AuditEntry.action == "KNOWLEDGE_PROPOSED_BY_TASK")).scalars().all()
        items = session.execute(select(KnowledgeItem)).scalars().all()
    assert (candidate.origin, candidate.authority, candidate.author_user_id) == ("TASK", "P2", "alice")
    sha256 = hashlib.sha256(content).hexdigest()
    assert candidate.source_refs == [f"task:{task_id}", f"artifact:{sha256}", "ticket:INC-42"]
    assert candidate.structured is not None and candidate.structured["attempts"][0]["outcome"] == "failed"
    assert candidate.redactions == [{"kind": "phone", "path": "evidence/0/quote"}]
    assert [a["outcomes"] for a in audit] == [["opened", "knowledge_candidate_invalid"]]
    assert items == []
