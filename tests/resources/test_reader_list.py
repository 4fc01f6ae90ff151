"""list through the real app and PostgreSQL: each filter type, keyset pages to the end, readable fields only,
strict query parameters, and number filters of a deployment's own declaration."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from api.settings import Settings
from memory.errors import InvalidInput
from memory.resources.bodies import record_store
from memory.resources.catalog import load_catalog
from memory.resources.reader import Reader
from memory.resources.records import save_record
from tests.conftest import MakeKey, auth
from tests.resources.reader_support import agent_access, error, new_key, put, reader, tenant


def listing(client: TestClient, key: str, resource: str, **params: str) -> Any:
    response = client.get(f"/resources/{resource}", params=params, headers=auth(key))
    assert response.status_code == 200, response.text
    assert len(response.content) <= 65_536
    return response.json()


def refs(page: Any) -> list[str]:
    return [item["ref"] for item in page["items"]]


def test_each_filter_type(client: TestClient, make_key: MakeKey) -> None:
    key = new_key(make_key)
    put(client, key, "episode:e1", {"title": "周会", "summary": "s"})
    put(client, key, "todo:a", {"title": "a", "status": "open", "due_at": "2026-06-01T09:00:00+08:00",
                                "episode": "episode:e1", "priority": "high"})
    put(client, key, "todo:b", {"title": "b", "status": "done", "due_at": "2026-06-02T09:00:00Z"})
    put(client, key, "todo:c", {"title": "c", "status": "open"})
    put(client, key, "calendar:x", {"title": "x", "starts_at": "2026-06-01T00:00:00Z", "all_day": True})
    put(client, key, "calendar:y", {"title": "y", "starts_at": "2026-06-01T00:00:00Z", "all_day": False})
    put(client, key, "episode:e2", {"title": "评审", "summary": "s",
                                    "participants": [{"display_name": "王", "contact": "contact:wang"}]})

    assert refs(listing(client, key, "todo", status="open")) == ["todo:c", "todo:a"]
    assert refs(listing(client, key, "todo", status="open", priority="high")) == ["todo:a"]
    # Timestamps compare as instants, whatever offset each side was written with.
    assert refs(listing(client, key, "todo", due_at="2026-06-01T01:00:00Z")) == ["todo:a"]
    assert refs(listing(client, key, "todo", due_at_from="2026-06-01T01:00:00Z")) == ["todo:b", "todo:a"]
    assert refs(listing(client, key, "todo", due_at_from="2026-06-01T01:00:01Z")) == ["todo:b"]
    assert refs(listing(client, key, "todo", due_at_before="2026-06-02T09:00:00Z")) == ["todo:a"]
    assert refs(listing(client, key, "todo", episode="episode:e1")) == ["todo:a"]
    assert refs(listing(client, key, "calendar", all_day="true")) == ["calendar:x"]
    assert refs(listing(client, key, "calendar", all_day="false")) == ["calendar:y"]
    # A ref filter on an array's items: any participant.
    assert refs(listing(client, key, "episode", participant="contact:wang")) == ["episode:e2"]
    assert refs(listing(client, key, "episode", participant="contact:li")) == []


def test_pages_newest_first_to_the_end_with_the_filters_bound(client: TestClient, make_key: MakeKey) -> None:
    key = new_key(make_key)
    for index in range(45):
        put(client, key, f"todo:p{index:02d}", {"title": f"任务 {index}", "status": "open" if index % 3 else "done"})
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params = {"status": "open"} | ({"cursor": cursor} if cursor else {})
        page = listing(client, key, "todo", **params)
        pages += 1
        seen += refs(page)
        cursor = page["next_cursor"]
        if cursor is None:
            break
        other_filters = client.get("/resources/todo", params={"status": "done", "cursor": cursor}, headers=auth(key))
        assert error(other_filters, 422) == "cursor_mismatch"
        assert other_filters.json()["error"]["details"] == {"cursor": {  # what it continues, as the README says
            "operation": "list", "resource": "todo", "ref": None, "same_filters": False}}
    expected = [f"todo:p{index:02d}" for index in reversed(range(45)) if index % 3]
    assert (seen, pages) == (expected, 2)
    whole = listing(client, key, "todo")
    assert len(whole["items"]) == 20 and whole["items"][0]["data"] == {"title": "任务 44", "status": "open"}


def test_items_carry_readable_fields_only_and_name_long_ones(client: TestClient, make_key: MakeKey) -> None:
    tenant_id = tenant()
    key = new_key(make_key, tenant_id)
    put(client, key, "todo:n", {"title": "更新推送配置", "status": "open", "notes": "内部联系方式"})
    put(client, key, "transcript:t", {"title": "会议转写", "text": "原话" * 10})
    agent_a = agent_access(tenant_id, "alice", "agent-a", {"todo": ("/title", "/status")})
    item = reader(client).list(agent_a, "todo", {}, None).items[0]
    assert (item.ref, item.title, item.data, item.omitted) == ("todo:n", "更新推送配置",
                                                              {"title": "更新推送配置", "status": "open"}, [])
    with pytest.raises(InvalidInput) as caught:
        reader(client).list(agent_a, "todo", {"status": "open", "priority": "low"}, None)
    assert caught.value.code == "filter_not_readable"
    put(client, key, "transcript:big", {"title": "长转写", "text": "原话" * 60_000})  # in the artifact store
    big, short = listing(client, key, "transcript")["items"]
    assert (short["data"], short["omitted"]) == ({"title": "会议转写"}, ["/text"])
    assert (big["ref"], big["data"], big["omitted"]) == ("transcript:big", {"title": "长转写"}, ["/text"])


@pytest.mark.parametrize(("params", "code"), [
    ({"colour": "red"}, "unknown_filter"),
    ({"title": "a"}, "unknown_filter"),  # a field, but not a declared filter
    ({"status_from": "open"}, "unknown_filter"),  # ranges are for timestamps and numbers only
    ({"due_at": "2026-06-01T09:00:00"}, "invalid_timestamp"),
    ({"due_at_from": "yesterday"}, "invalid_timestamp"),
    ({"due_at": "2300-01-01T00:00:00Z"}, "timestamp_out_of_range"),
    ({"episode": "todo:x"}, "invalid_filter_value"),
    ({"status": ""}, "invalid_filter_value"),
    ({"cursor": ""}, "invalid_value"),
])
def test_strict_query_parameters(client: TestClient, make_key: MakeKey, params: dict[str, str], code: str) -> None:
    key = new_key(make_key)
    response = client.get("/resources/todo", params=params, headers=auth(key))
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == code, response.text


def test_duplicate_and_boolean_parameters(client: TestClient, make_key: MakeKey) -> None:
    key = new_key(make_key)
    assert error(client.get("/resources/todo?status=open&status=done", headers=auth(key)), 422) == "duplicate_filter"
    assert error(client.get("/resources/calendar?all_day=1", headers=auth(key)), 422) == "invalid_filter_value"
    assert error(client.get("/resources/nothing", headers=auth(key)), 404) == "unknown_resource"


def test_a_public_key_never_lists_internal_types(client: TestClient, make_key: MakeKey) -> None:
    tenant_id = tenant()
    key = new_key(make_key, tenant_id)
    public = new_key(make_key, tenant_id, roles=("public_client",))
    put(client, key, "todo:t", {"title": "t", "status": "open", "notes": "内部", "assignee": "contact:c"})
    for internal in ("transcript", "digest", "intent", "user_profile"):
        assert error(client.get(f"/resources/{internal}", headers=auth(public)), 404) == "unknown_resource"
    item = listing(client, public, "todo")["items"][0]
    assert item["data"] == {"title": "t", "status": "open"}  # notes and assignee are beyond the public ceiling


def test_number_and_integer_filters_of_a_deployment_declaration(
    client: TestClient, engine: Engine, settings: Settings, tmp_path: Path, make_key: MakeKey,
) -> None:
    declaration = {
        "type": "reading", "description": "A meter reading.", "title": "/label", "operations": ["list", "read"],
        "schema": {"type": "object", "additionalProperties": False, "required": ["label"],
                   "properties": {"label": {"type": "string"}, "count": {"type": "integer"},
                                  "value": {"type": "number"}}},
        "filters": {"count": {"path": "/count", "type": "integer"}, "value": {"path": "/value", "type": "number"}},
        "audiences": {"internal": ["/label", "/count", "/value"]},
    }
    (tmp_path / "reading.json").write_text(json.dumps(declaration), encoding="utf-8")
    catalog = load_catalog(tmp_path)
    own = Reader.build(engine, catalog, settings.artifact_root(engine), reader(client).keys)
    tenant_id = tenant()
    new_key(make_key, tenant_id)  # the tenant exists
    access = agent_access(tenant_id, "alice", "agent-m", {"reading": ("/label", "/count", "/value")})
    store = record_store(settings.artifact_root(engine), tenant_id)
    owner = dataclasses.replace(access.principal, agent_id=None)  # alice's own app writes; the agent reads
    for name, count, value in (("r1", 1, 0.5), ("r2", 2, 1.0), ("r3", 3, 2.25)):
        save_record(engine, owner, catalog.get("reading"), name, {"label": name, "count": count, "value": value},
                    None, store)

    def found(**filters: str) -> list[str]:
        return [item.ref for item in own.list(access, "reading", filters, None).items]

    assert found(count="2") == ["reading:r2"]
    assert found(value="1") == ["reading:r2"]  # 1 and 1.0 are the same number
    assert found(count_from="2") == ["reading:r3", "reading:r2"]
    assert found(value_before="1.0") == ["reading:r1"]
    assert found(value_from="0.5", value_before="2.25") == ["reading:r2", "reading:r1"]
    with pytest.raises(InvalidInput) as caught:
        found(count="2.5")
    assert caught.value.code == "invalid_filter_value"
