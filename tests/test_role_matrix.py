"""Every memory write path × every role × every space, against a table written out here (issue 12, findings 3-4).

The expectations are spelled out literally, not read from :mod:`memory.store.permissions`, so a change
to the rules there fails here until someone decides the table should change too. Before the fix a
key with no roles deleted a TENANT memory (202), and a memory_writer corrected, expired and
confirmed TENANT memories.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import MakeKey, auth
from tests.factories import candidate

ROLES = ("", "memory_writer", "approver", "operator", "auditor", "knowledge_reviewer", "admin")
ACTIONS = ("create", "confirm", "correct", "expire", "delete")
W, A, ANY = {"memory_writer", "admin"}, {"admin"}, set(ROLES)

ALLOWED: dict[str, dict[str, set[str]]] = {
    # A person's own memories: anyone may submit and delete; status and content need a writer.
    "USER": {"create": ANY, "confirm": W, "correct": W, "expire": W, "delete": ANY},
    # An agent's memories (the key is bound to the agent): anyone may submit, the rest needs a writer.
    "AGENT": {"create": ANY, "confirm": W, "correct": W, "expire": W, "delete": W},
    # Tenant-wide memories speak for everyone: admins only.
    "TENANT": {"create": A, "confirm": A, "correct": A, "expire": A, "delete": A},
}
CATEGORY = {"USER": "EVENT", "AGENT": "CASE", "TENANT": "CASE"}
SUCCESS = {"create": 201, "confirm": 200, "correct": 200, "expire": 200, "delete": 202}


def _body(space: str, **overrides: Any) -> dict[str, Any]:
    return candidate(f"a {space} memory {uuid.uuid4().hex[:6]}", space=space, category=CATEGORY[space], **overrides)


def _act(client: TestClient, key: str, action: str, space: str, memory_id: str) -> Any:
    if action == "create":
        return client.post("/memory-candidates", json=_body(space), headers=auth(key))
    if action == "confirm":
        return client.post(f"/memory-candidates/{memory_id}/confirm", headers=auth(key))
    if action == "correct":
        return client.patch(f"/memories/{memory_id}", json={"expected_version": 1, "content": "corrected"},
                            headers=auth(key))
    if action == "expire":
        return client.post(f"/memories/{memory_id}/expire", headers=auth(key))
    return client.delete(f"/memories/{memory_id}", headers=auth(key))


@pytest.mark.parametrize("space", sorted(ALLOWED))
@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("role", ROLES)
def test_role_matrix(client: TestClient, make_key: MakeKey, space: str, action: str, role: str) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    roles = (role,) if role else ()
    # Same user and agent as the caller, so personal and agent memories are theirs and visible to them.
    admin = make_key(tenant=tenant, user="alice", roles=("admin",), agent="bot")
    caller = make_key(tenant=tenant, user="alice", roles=roles, agent="bot")
    memory_id = ""
    if action != "create":
        # A candidate to confirm (a model's inference stays one); an active memory for the rest.
        level = "E4" if action == "confirm" else "E2"
        written = client.post("/memory-candidates", json=_body(space, source_level=level), headers=auth(admin))
        assert written.status_code == 201, written.text
        memory_id = written.json()["memory_id"]
    response = _act(client, caller, action, space, memory_id)
    if role in ALLOWED[space][action]:
        assert response.status_code == SUCCESS[action], response.text
    else:
        assert response.status_code == 403, response.text
        error = response.json()["error"]
        assert error["code"] == "forbidden" and error["details"]["space"] == space
        if memory_id:  # refused means nothing changed
            after = client.get(f"/memories/{memory_id}", headers=auth(admin)).json()
            assert after["version"] == 1 and after["status"] == ("CANDIDATE" if action == "confirm" else "ACTIVE")


def test_a_batch_item_is_refused_as_the_single_create_is(client: TestClient, make_key: MakeKey) -> None:
    """``POST /memory-candidates:batch``: each item meets the create rule of its space; a refused one is that
    item's 403-style error, the others of the batch are written."""
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    for role in ROLES:
        caller = make_key(tenant=tenant, user="alice", roles=(role,) if role else (), agent="bot")
        spaces = sorted(ALLOWED)
        answer = client.post("/memory-candidates:batch", json={"items": [_body(space) for space in spaces]},
                             headers=auth(caller))
        assert answer.status_code == 200, answer.text
        for space, item in zip(spaces, answer.json()["results"], strict=True):
            if role in ALLOWED[space]["create"]:
                assert item["outcome"] == "committed", (role, space, item)
            else:
                assert item["outcome"] == "error", (role, space, item)
                assert item["error"]["code"] == "forbidden" and item["error"]["details"]["space"] == space
