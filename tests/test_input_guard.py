"""Malformed input is a typed 422, never a 500: timestamps out of range."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel

import api.routers.tasks  # noqa: F401 - its request models are StrictRequest subclasses too
from api.schemas import StrictRequest
from tests.conftest import MakeKey, auth
from tests.factories import candidate, event

ALL_ROLES = ("admin", "memory_writer", "approver", "operator", "auditor")


@pytest.fixture(scope="module")
def key(make_key: MakeKey) -> str:
    return make_key(roles=ALL_ROLES)


# --- timestamps ----------------------------------------------------------------------------------

POISON = ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "1899-12-31T23:59:59Z", "2200-01-01T00:00:00Z"]


def _with_stamp(where: str, stamp: str) -> tuple[str, dict[str, Any]]:
    if where == "event.occurred_at":
        return "/memory-events", event(f"e-{uuid.uuid4()}", occurred_at=stamp)
    body = candidate(f"poison {uuid.uuid4()}")
    if where == "source.captured_at":
        body["source"]["captured_at"] = stamp
    else:
        body["validity"] = {where.split(".")[1]: stamp}
    return "/memory-candidates", body


STAMPED = ["event.occurred_at", "source.captured_at", "validity.observed_at", "validity.effective_from",
           "validity.effective_to", "validity.expires_at"]


@pytest.mark.parametrize("stamp", POISON)
@pytest.mark.parametrize("where", STAMPED)
def test_a_timestamp_out_of_range_is_refused(client: TestClient, key: str, where: str, stamp: str) -> None:
    """Finding 6: these were stored, and then every GET and recall meeting the memory was a 500."""
    path, body = _with_stamp(where, stamp)
    response = client.post(path, json=body, headers=auth(key))
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "timestamp_out_of_range"
    assert "1900-01-01T00:00:00Z" in error["message"] and "2200-01-01T00:00:00Z" in error["message"]


@pytest.mark.parametrize("stamp", POISON[:2])
def test_a_correction_with_a_timestamp_out_of_range_is_refused(client: TestClient, key: str, stamp: str) -> None:
    written = client.post("/memory-candidates", json=candidate(f"to correct {uuid.uuid4()}"), headers=auth(key))
    memory_id = written.json()["memory_id"]
    body = {"expected_version": 1, "content": "corrected", "validity": {"expires_at": stamp}}
    response = client.patch(f"/memories/{memory_id}", json=body, headers=auth(key))
    assert response.status_code == 422 and response.json()["error"]["code"] == "timestamp_out_of_range"
    assert client.get(f"/memories/{memory_id}", headers=auth(key)).json()["version"] == 1


def test_the_bounds_themselves_are_stored_and_read_back(client: TestClient, key: str) -> None:
    marker = f"bounds{uuid.uuid4().hex[:8]}"
    body = candidate(f"{marker} 边界", validity={"effective_from": "1900-01-01T00:00:00Z",
                                                "expires_at": "2199-12-31T23:59:59+00:00"})
    body["source"]["captured_at"] = "1900-01-01T00:00:00+00:00"
    written = client.post("/memory-candidates", json=body, headers=auth(key))
    assert written.status_code == 201, written.text
    read = client.get(f"/memories/{written.json()['memory_id']}", headers=auth(key))
    assert read.status_code == 200 and read.json()["validity"]["expires_at"].startswith("2199-12-31T23:59:59")
    recall = client.post("/memory-query", json={"query": marker}, headers=auth(key))
    assert recall.status_code == 200, recall.text


def _strict_models() -> list[type[BaseModel]]:
    found, pending = [], [StrictRequest]
    while pending:
        model = pending.pop()
        found.append(model)
        pending.extend(model.__subclasses__())
    return found


def test_every_timestamp_of_every_request_model_is_bounded() -> None:
    """Each datetime field of each request model (today's and tomorrow's) refuses year 9999 in UTC."""
    checked = []
    for model in _strict_models():
        for name, field in model.model_fields.items():
            if "datetime" not in repr(field.annotation).lower():
                continue
            checked.append(f"{model.__name__}.{name}")
            errors = []
            try:
                model.model_validate({name: "9999-12-31T23:59:59-14:00"})
            except Exception as exc:  # noqa: BLE001 - a ValidationError with one entry per problem
                errors = exc.errors()  # type: ignore[attr-defined]
            assert any(e["loc"] == (name,) and e["type"] == "timestamp_out_of_range" for e in errors), (
                f"{model.__name__}.{name} accepts a timestamp out of range: use api.schemas.Timestamp"
            )
    assert "SourceIn.captured_at" in checked and "EventIn.occurred_at" in checked and len(checked) >= 6


def test_a_report_month_outside_the_range_is_refused(client: TestClient, key: str) -> None:
    body = {"task_type": "monthly-report", "request_intent_id": "m", "goal": {"month": "0000-01", "currency": "EUR"}}
    response = client.post("/tasks", json=body, headers=auth(key))
    assert response.status_code == 422 and response.json()["error"]["fields"][0]["field"] == "goal.month"
