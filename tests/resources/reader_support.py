"""What the reader's tests share: writing records and calling list / search / read through the real app, and
the access of a run's agent built directly (runs and policies land in another slice)."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi.testclient import TestClient

from memory.identity.auth import PrincipalContext
from memory.resources.access import Access, Grant
from memory.resources.declarations import Audience, Operation
from memory.resources.reader import Reader
from tests.conftest import MakeKey, auth

ALL_OPERATIONS = frozenset(Operation)


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def new_key(make_key: MakeKey, tenant_id: str | None = None, user: str = "alice", **extra: Any) -> str:
    return make_key(tenant=tenant_id or tenant(), user=user, **extra)


def allow(client: TestClient, make_key: MakeKey, tenant_id: str, agent: str, resource: str, *fields: str) -> None:
    """An admin of ``tenant_id`` lets ``agent`` list, search and read ``fields`` of ``resource``."""
    set_policy(client, new_key(make_key, tenant_id, user="root", roles=("admin",)), agent, resource, list(fields))


def set_policy(client: TestClient, admin: str, agent: str, resource: str, fields: list[str]) -> None:
    """``admin`` lets ``agent`` list, search and read ``fields`` of ``resource`` (replacing its policy)."""
    body = {"operations": ["list", "search", "read"], "fields": fields}
    response = client.put(f"/policies/{agent}/{resource}", json=body, headers=auth(admin))
    assert response.status_code == 200, response.text


def run_headers(client: TestClient, runtime: str, agent: str) -> dict[str, str]:
    """The headers of a new run of ``agent``, registered by the ``runtime`` key."""
    started = client.post("/runs", json={"thread_id": "th-1", "agent_id": agent}, headers=auth(runtime))
    assert started.status_code == 201, started.text
    return {**auth(runtime), "X-Mnemo-Run": started.json()["run_id"]}


def put(client: TestClient, key: str, ref: str, data: dict[str, Any], version: int | None = None) -> int:
    resource, record_id = ref.split(":")
    body: dict[str, Any] = {"data": data} if version is None else {"data": data, "expected_version": version}
    response = client.put(f"/records/{resource}/{record_id}", json=body, headers=auth(key))
    assert response.status_code in (200, 201), response.text
    return int(response.json()["version"])


def search(client: TestClient, key: str, **body: Any) -> Any:
    response = client.post("/resources/search", json=body, headers=auth(key))
    assert response.status_code == 200, response.text
    return response.json()


def read(client: TestClient, key: str, **body: Any) -> Any:
    response = client.post("/resources/read", json=body, headers=auth(key))
    assert response.status_code == 200, response.text
    return response.json()


def error(response: Any, status: int) -> str:
    assert response.status_code == status, response.text
    return str(response.json()["error"]["code"])


def reader(client: TestClient) -> Reader:
    app_reader: Reader = client.app.state.reader  # type: ignore[attr-defined]
    return app_reader


def agent_access(tenant_id: str, user: str, agent: str, grants: dict[str, tuple[str, ...]]) -> Access:
    """What a run of ``agent`` may read: these fields of these types, every operation."""
    principal = PrincipalContext(tenant_id=tenant_id, user_id=user, agent_id=agent,
                                 roles=frozenset({"memory_writer"}), key_id=f"key-{agent}")
    return Access(principal=principal, audience=Audience.INTERNAL, agent_id=agent, run_id=f"run-{agent}",
                  grants={name: Grant(name, ALL_OPERATIONS, tuple(sorted(fields))) for name, fields in grants.items()})
