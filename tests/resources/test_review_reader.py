"""Review of issue 15's reader: a key reading under an agent's policy cannot go around it through /records, an
oversized title never ends a list early nor hides a hit, and reassembly handles long strings inside arrays."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.conftest import MakeKey, auth
from tests.resources.reader_support import allow, error, new_key, put, read, tenant

TODO = {"title": "Buy milk", "status": "open", "notes": "secret zebra"}


def test_a_key_reading_under_an_agents_policy_cannot_read_or_write_records_around_it(
    client: TestClient, make_key: MakeKey
) -> None:
    """The agent may read /title and /status of todos: GET /records would hand it /notes, and a PUT of a guess
    would tell it whether /notes is that guess (a replay, 200) or not (a 409). Both are refused, as a DELETE is
    (a policy grants reads only); the user's own key keeps the whole record."""
    tenant_id = tenant()
    user = new_key(make_key, tenant_id)
    put(client, user, "todo:t1", TODO)
    allow(client, make_key, tenant_id, "agent-a", "todo", "/title", "/status")
    bound = new_key(make_key, tenant_id, agent="agent-a")
    runtime = new_key(make_key, tenant_id, roles=("agent_runtime",))
    deletion = {"deletion_request_id": "by-agent", "scope": {"type": "record", "resource": "todo", "record_id": "t1"}}
    for key in (bound, runtime):
        got = client.get("/records/todo/t1", headers=auth(key))
        assert error(got, 403) == "agent_key_on_records" and "zebra" not in got.text
        guess = client.put("/records/todo/t1", json={"data": TODO}, headers=auth(key))
        assert error(guess, 403) == "agent_key_on_records"
        assert error(client.delete("/records/todo/t1", headers=auth(key)), 403) == "agent_key_on_records"
        assert error(client.post("/deletion-requests", json=deletion, headers=auth(key)), 403) == "agent_key_on_records"
    assert read(client, bound, ref="todo:t1")["data"] == {"title": "Buy milk", "status": "open"}
    whole = client.get("/records/todo/t1", headers=auth(user))
    assert whole.status_code == 200 and whole.json()["data"] == TODO and whole.json()["version"] == 1

