"""API key lifecycle: expiry, list, revoke, rotate (with a grace period), a user's keys revoked, all audited.

The CLI runs as a real subprocess against the test database; keys are then used through the API.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, select, update

from api.settings import Settings
from memory.db import global_session, tenant_session
from memory.identity.auth import create_api_key
from memory.identity.keys import revoke_keys
from memory.models import ApiKey, AuditEntry
from tests.conftest import MakeKey, auth
from tests.test_cli import _env, _run

MEMORY = {
    "category": "PROFILE", "space": "USER", "content": "密钥轮换之后仍是同一个人",
    "source": {"source_id": "keys", "source_type": "TEST", "captured_at": "2026-06-01T00:00:00Z"},
    "source_level": "E2",
}


def _key_id(key: str) -> str:
    return key.split("_")[1]


def _move(engine: Engine, key: str, **values: Any) -> None:
    """Let time pass for one key: move its expiry or scheduled revocation into the past."""
    with global_session(engine) as session:
        session.execute(update(ApiKey).where(ApiKey.key_id == _key_id(key)).values(**values))


def _audit(engine: Engine, tenant: str) -> list[AuditEntry]:
    with tenant_session(engine, tenant) as session:
        return list(
            session.execute(
                select(AuditEntry).where(AuditEntry.tenant_id == tenant, AuditEntry.action.like("KEY_%"))
                .order_by(AuditEntry.audit_id)
            ).scalars()
        )


def _listed(settings: Settings, tenant: str, *extra: str) -> list[dict[str, Any]]:
    result = _run(["keys", "list", "--tenant", tenant, "--json", *extra], _env(settings))
    assert result.returncode == 0, result.stderr
    listed: list[dict[str, Any]] = json.loads(result.stdout)
    return listed


def test_an_expired_key_is_a_401_saying_it_expired(client: TestClient, engine: Engine) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    with tenant_session(engine, tenant) as session:
        key = create_api_key(session, tenant_id=tenant, user_id="alice", roles=["memory_writer"],
                             expires_in=timedelta(days=1))
    assert client.post("/memory-candidates", json=MEMORY, headers=auth(key)).status_code == 201
    _move(engine, key, expires_at=datetime.now(UTC) - timedelta(seconds=1))
    for response in (
        client.post("/memory-candidates", json=MEMORY, headers=auth(key)),
        client.post("/memory-query", json={"query": "密钥"}, headers=auth(key)),  # authenticates in its own transaction
    ):
        assert response.status_code == 401, response.text
        assert response.json()["error"]["code"] == "key_expired"
        assert "expired" in response.json()["error"]["message"]
    # Someone without the secret learns nothing about the key's state.
    forged = key[: key.rindex("_") + 1] + "A" * 43
    refused = client.post("/memory-candidates", json=MEMORY, headers=auth(forged))
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"


def test_keys_create_list_rotate_revoke_through_the_cli(settings: Settings, client: TestClient, engine: Engine) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    created = _run(["keys", "create", "--tenant", tenant, "--user", "carol", "--roles", "memory_writer,approver",
                    "--expires-in", "30d"], _env(settings))
    assert created.returncode == 0, created.stderr
    old = created.stdout.strip()
    (listed,) = _listed(settings, tenant)
    assert listed["key_id"] == _key_id(old) and listed["state"] == "active"
    assert listed["roles"] == ["approver", "memory_writer"]
    lifetime = datetime.fromisoformat(listed["expires_at"]) - datetime.fromisoformat(listed["created_at"])
    assert abs(lifetime - timedelta(days=30)) < timedelta(minutes=1)
    assert "secret" not in json.dumps(listed) and old.split("_", 2)[2] not in json.dumps(listed)

    rotated = _run(["keys", "rotate", _key_id(old)], _env(settings))
    assert rotated.returncode == 0, rotated.stderr
    new = rotated.stdout.strip()
    assert new != old and f"replaces {_key_id(old)}" in rotated.stderr
    written = client.post("/memory-candidates", json=MEMORY, headers=auth(new))
    assert written.status_code == 201, written.text
    assert written.json()["status"] == "ACTIVE"  # still a memory_writer
    assert client.get(f"/memories/{written.json()['memory_id']}", headers=auth(new)).json()["owner_id"] == "carol"
    assert client.post("/memory-candidates", json=MEMORY, headers=auth(old)).status_code == 401

    (in_use,) = _listed(settings, tenant)
    assert in_use["key_id"] == _key_id(new) and in_use["rotated_from"] == _key_id(old)
    assert in_use["roles"] == ["approver", "memory_writer"]
    new_lifetime = datetime.fromisoformat(in_use["expires_at"]) - datetime.fromisoformat(in_use["created_at"])
    assert abs(new_lifetime - timedelta(days=30)) < timedelta(minutes=1)  # the old key's lifetime, again
    states = {key["key_id"]: key["state"] for key in _listed(settings, tenant, "--all")}
    assert states == {_key_id(old): "revoked", _key_id(new): "active"}

    revoked = _run(["keys", "revoke", new, "--reason", "left the team"], _env(settings))  # a whole key is accepted
    assert revoked.returncode == 0, revoked.stderr
    assert client.post("/memory-candidates", json=MEMORY, headers=auth(new)).status_code == 401
    assert _listed(settings, tenant) == []
    again = _run(["keys", "revoke", _key_id(new)], _env(settings))
    assert again.returncode == 0, again.stderr  # nothing to do, and nothing audited twice

    entries = _audit(engine, tenant)
    assert [(entry.action, entry.detail["key_id"]) for entry in entries] == [
        ("KEY_CREATED", _key_id(old)), ("KEY_ROTATED", _key_id(old)), ("KEY_REVOKED", _key_id(new)),
    ]
    assert all(entry.actor.startswith("cli:") for entry in entries)
    assert entries[1].detail["replaced_by"] == _key_id(new)
    assert entries[2].detail["reason"] == "left the team"
    for entry in entries:  # ids, roles and instants only
        detail = json.dumps(entry.detail)
        assert old.split("_", 2)[2] not in detail and new.split("_", 2)[2] not in detail


def test_rotate_with_a_grace_period_keeps_the_old_key_until_it_ends(
    settings: Settings, client: TestClient, engine: Engine, make_key: MakeKey
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    old = make_key(tenant=tenant, user="dave")
    rotated = _run(["keys", "rotate", _key_id(old), "--grace", "1h"], _env(settings))
    assert rotated.returncode == 0, rotated.stderr
    new = rotated.stdout.strip()
    for key in (old, new):
        assert client.post("/memory-candidates", json=MEMORY, headers=auth(key)).status_code == 201
    states = {key["key_id"]: key["state"] for key in _listed(settings, tenant)}
    assert states == {_key_id(old): "grace", _key_id(new): "active"}
    with global_session(engine) as session:
        stored = session.get(ApiKey, _key_id(new))
        assert stored is not None
        assert stored.expires_at is None  # the old key never expired either
    twice = _run(["keys", "rotate", _key_id(old)], _env(settings))
    assert twice.returncode == 1 and twice.stdout == ""
    assert "already being rotated" in twice.stderr
    _move(engine, old, revoked_at=datetime.now(UTC) - timedelta(seconds=1))  # the hour has passed
    assert client.post("/memory-candidates", json=MEMORY, headers=auth(old)).status_code == 401
    assert client.post("/memory-candidates", json=MEMORY, headers=auth(new)).status_code == 201


def test_revoke_keys_revokes_every_key_of_one_user_and_audits_each(
    client: TestClient, engine: Engine, make_key: MakeKey
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    alices = [make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="alice")]
    bobs = make_key(tenant=tenant, user="bob")
    with tenant_session(engine, tenant) as session:
        revoked = revoke_keys(session, tenant, "alice", actor="deletion", reason="subject deleted")
    assert sorted(revoked) == sorted(_key_id(key) for key in alices)
    for key in alices:
        assert client.post("/memory-candidates", json=MEMORY, headers=auth(key)).status_code == 401
    assert client.post("/memory-candidates", json=MEMORY, headers=auth(bobs)).status_code == 201
    with tenant_session(engine, tenant) as session:
        assert revoke_keys(session, tenant, "alice", actor="deletion") == []  # already done: nothing more
    revocations = [entry for entry in _audit(engine, tenant) if entry.action == "KEY_REVOKED"]
    assert sorted(entry.detail["key_id"] for entry in revocations) == sorted(revoked)
    assert {entry.actor for entry in revocations} == {"deletion"}


def test_key_commands_refuse_bad_input_in_one_line(settings: Settings) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    for args, expected in (
        (["keys", "create", "--tenant", tenant, "--user", "u", "--expires-in", "5 parsecs"], "is not a duration"),
        (
            ["keys", "create", "--tenant", tenant, "--user", "u", "--expires-in", "10s"],
            "between 1 minute and 3650 days",
        ),
        (["keys", "rotate", "zzzzzzzzzzzz"], "API key zzzzzzzzzzzz does not exist"),
        (["keys", "revoke", "not-a-key"], "expected a key id"),
        (["keys", "rotate", "zzzzzzzzzzzz", "--grace", "31d"], "grace period must be between 0 and 30 days"),
    ):
        result = _run(args, _env(settings))
        assert result.returncode == 1, (args, result.stdout, result.stderr)
        assert result.stdout == ""
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and expected in lines[0], (args, result.stderr)
