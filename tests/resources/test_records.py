"""Source records through the API against the real PostgreSQL: create, update, replay, stale versions, strict
validation by the declaration, the owner wall, the catalog per audience, the search projection by field path
and long bodies in the artifact store."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from api.settings import Settings
from memory.artifact_store import read as read_artifact
from memory.db import tenant_session
from memory.resources.bodies import encode, record_store
from memory.text import lexemes, normalize
from tests.conftest import MakeKey, auth


def _put(client: TestClient, key: str, path: str, data: dict[str, Any], **extra: Any) -> Any:
    return client.put(f"/records/{path}", json={"data": data, **extra}, headers=auth(key))


def _rid() -> str:
    return f"r-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def alice(make_key: MakeKey) -> tuple[str, str]:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    return tenant, make_key(tenant=tenant, user="alice")


def test_create_update_replay_and_stale_versions(client: TestClient, alice: tuple[str, str]) -> None:
    _, key = alice
    rid = _rid()
    todo = {"title": "更新推送配置", "status": "open"}
    created = _put(client, key, f"todo/{rid}", todo)
    assert (created.status_code, created.json()) == (201, {"ref": f"todo:{rid}", "version": 1, "replayed": False})
    replay = _put(client, key, f"todo/{rid}", todo)
    assert (replay.status_code, replay.json()["version"], replay.json()["replayed"]) == (200, 1, True)
    done = {**todo, "status": "done", "completed_at": "2026-07-15T10:00:00+08:00"}
    without_version = _put(client, key, f"todo/{rid}", done)
    assert without_version.status_code == 409
    assert without_version.json()["error"]["code"] == "version_conflict"
    assert without_version.json()["error"]["details"] == {"current_version": 1}
    updated = _put(client, key, f"todo/{rid}", done, expected_version=1)
    assert (updated.status_code, updated.json()["version"], updated.json()["replayed"]) == (200, 2, False)
    # The same update sent again (its expected_version now stale) is a replay of what it wrote.
    again = _put(client, key, f"todo/{rid}", done, expected_version=1)
    assert (again.status_code, again.json()["version"], again.json()["replayed"]) == (200, 2, True)
    stale = _put(client, key, f"todo/{rid}", {**done, "notes": "late"}, expected_version=1)
    assert stale.status_code == 409 and stale.json()["error"]["details"] == {"current_version": 2}
    read = client.get(f"/records/todo/{rid}", headers=auth(key))
    assert read.status_code == 200
    body = read.json()
    assert (body["ref"], body["version"], body["data"], body["long_fields"]) == (f"todo:{rid}", 2, done, [])
    missing = _put(client, key, f"todo/{_rid()}", todo, expected_version=1)
    assert missing.status_code == 404 and "create it without expected_version" in missing.json()["error"]["message"]


BAD_DATA: dict[str, tuple[dict[str, Any], str, str]] = {
    "unknown key": ({"title": "t", "status": "open", "owner": "bob"}, "unknown_field", "/"),
    "nested unknown key": ({"title": "t", "summary": "s", "participants": [{"display_name": "Li", "age": 3}]},
                           "unknown_field", "/participants/0"),
    "explicit null": ({"title": "t", "status": "open", "notes": None}, "invalid_type", "/notes"),
    "missing field": ({"title": "t"}, "missing_field", "/"),
    "wrong type": ({"title": 5, "status": "open"}, "invalid_type", "/title"),
    "value outside the enum": ({"title": "t", "status": "maybe"}, "invalid_value", "/status"),
    "timestamp without a zone": ({"title": "t", "status": "open", "due_at": "2026-07-15T10:00:00"},
                                 "invalid_timestamp", "/due_at"),
    "timestamp out of range": ({"title": "t", "status": "open", "due_at": "2300-01-01T00:00:00Z"},
                               "invalid_timestamp", "/due_at"),
    "not a timestamp": ({"title": "t", "status": "open", "due_at": "tomorrow"}, "invalid_timestamp", "/due_at"),
    "ref to another type": ({"title": "t", "status": "open", "episode": "todo:x"}, "invalid_ref", "/episode"),
    "ref without a type": ({"title": "t", "summary": "s", "todos": ["todo:a", "b"]}, "invalid_ref", "/todos/1"),
}


@pytest.mark.parametrize("case", sorted(BAD_DATA))
def test_data_the_declaration_does_not_accept_is_a_422_naming_its_path(
    case: str, client: TestClient, alice: tuple[str, str]
) -> None:
    data, code, path = BAD_DATA[case]
    resource = "episode" if "summary" in data else "todo"
    refused = _put(client, alice[1], f"{resource}/{_rid()}", data)
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == code
    assert error["details"]["problems"][0]["path"] == path
    assert error["details"]["problems"][0]["code"] == code


def test_the_request_itself_is_parsed_strictly(client: TestClient, alice: tuple[str, str]) -> None:
    key = alice[1]
    extra = client.put(f"/records/todo/{_rid()}", json={"data": {"title": "t", "status": "open"}, "owner": "x"},
                       headers=auth(key))
    assert (extra.status_code, extra.json()["error"]["code"]) == (422, "unknown_field")
    null = client.put(f"/records/todo/{_rid()}", json={"data": {"title": "t", "status": "open"},
                                                      "expected_version": None}, headers=auth(key))
    assert (null.status_code, null.json()["error"]["code"]) == (422, "null_not_allowed")
    unknown = _put(client, key, f"meeting/{_rid()}", {"title": "t"})
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "unknown_resource")
    bad_id = _put(client, key, "todo/-bad", {"title": "t", "status": "open"})
    assert (bad_id.status_code, bad_id.json()["error"]["code"]) == (422, "invalid_record_id")


def test_a_record_is_its_owners_alone(client: TestClient, make_key: MakeKey, alice: tuple[str, str]) -> None:
    tenant, key = alice
    bob = make_key(tenant=tenant, user="bob")
    stranger = make_key(user="alice")  # the same user name in another tenant
    rid = _rid()
    assert _put(client, key, f"todo/{rid}", {"title": "alice's", "status": "open"}).status_code == 201
    nobody = _rid()
    missing = client.get(f"/records/todo/{nobody}", headers=auth(bob))
    for other in (bob, stranger):
        theirs = client.get(f"/records/todo/{rid}", headers=auth(other))
        assert theirs.status_code == missing.status_code == 404
        assert theirs.json()["error"] == {**missing.json()["error"], "message": f"no record todo:{rid}"}
        # The same id is theirs to create: another record, not alice's.
        mine = _put(client, other, f"todo/{rid}", {"title": "mine", "status": "done"})
        assert mine.status_code == 201 and mine.json()["version"] == 1
    assert client.get(f"/records/todo/{rid}", headers=auth(key)).json()["data"]["title"] == "alice's"
    assert client.get(f"/records/todo/{rid}", headers=auth(bob)).json()["data"]["title"] == "mine"


def test_the_catalog_per_audience(client: TestClient, make_key: MakeKey) -> None:
    internal = client.get("/resources", headers=auth(make_key(roles=())))
    assert internal.status_code == 200
    types = {r["type"]: r for r in internal.json()["resources"]}
    assert internal.json()["audience"] == "internal" and len(types) == 14  # seed 000's nine and mnemo's own five
    assert types["user_profile"]["operations"] == ["list", "read"]
    assert "/notes" in types["todo"]["fields"]
    public_key = make_key(roles=("public_client",))
    public = client.get("/resources", headers=auth(public_key)).json()
    assert public["audience"] == "public"
    assert [r["type"] for r in public["resources"]] == ["calendar", "contact", "episode", "todo", "voice_memo"]
    todo = next(r for r in public["resources"] if r["type"] == "todo")
    assert todo["fields"] == ["/completed_at", "/due_at", "/episode", "/priority", "/status", "/title"]
    # An admin holds every role but is not narrowed to the public catalog.
    admin = client.get("/resources", headers=auth(make_key(roles=("admin", "public_client")))).json()
    assert admin["audience"] == "internal"
    refused = _put(client, public_key, f"todo/{_rid()}", {"title": "t", "status": "open"})
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "forbidden")


def _projection(engine: Engine, tenant: str, resource: str, rid: str) -> dict[str, tuple[str, str, int]]:
    with tenant_session(engine, tenant) as session:
        rows = session.execute(
            text("SELECT field_path, search_text, tokens::text, version FROM resource_search"
                 " WHERE resource = :r AND record_id = :id"), {"r": resource, "id": rid}
        ).all()
    return {row[0]: (row[1], row[2], row[3]) for row in rows}


def _tokens(engine: Engine, tenant: str, raw: str) -> str:
    with tenant_session(engine, tenant) as session:
        return str(session.execute(text("SELECT to_tsvector('simple', :t)::text"),
                                   {"t": " ".join(lexemes(raw))}).scalar_one())


def test_the_projection_holds_exactly_the_declared_fields_text_by_path(
    client: TestClient, engine: Engine, alice: tuple[str, str]
) -> None:
    tenant, key = alice
    rid = _rid()
    episode = {
        "title": "移动端提醒方案评审", "summary": "决定提醒补发改为通知兜底。",
        "topics": ["提醒补发", "Notification fallback"],
        "participants": [{"display_name": "王设计", "contact": "contact:c-1", "role": "designer"},
                         {"display_name": "Li Lei"}],
        "analysis_status": "done", "transcript": "transcript:tr-1",
    }
    assert _put(client, key, f"episode/{rid}", episode).status_code == 201
    expected: dict[str, str] = {
        "/title": "移动端提醒方案评审", "/summary": "决定提醒补发改为通知兜底。",
        "/topics/*": "提醒补发\nNotification fallback",
        "/participants/*/display_name": "王设计\nLi Lei",
    }
    stored = _projection(engine, tenant, "episode", rid)
    assert stored == {path: (normalize(raw), _tokens(engine, tenant, raw), 1) for path, raw in expected.items()}
    # A todo whose notes hold a keyword: it is in the /notes row only, and leaves with the notes.
    todo_id = _rid()
    assert _put(client, key, f"todo/{todo_id}", {"title": "更新推送配置", "status": "open",
                                                 "notes": "call 13800138000"}).status_code == 201
    rows = _projection(engine, tenant, "todo", todo_id)
    assert set(rows) == {"/title", "/notes"} and "13800138000" not in rows["/title"][0] + rows["/title"][1]
    updated = _put(client, key, f"todo/{todo_id}", {"title": "更新推送配置", "status": "done"}, expected_version=1)
    assert updated.status_code == 200
    assert _projection(engine, tenant, "todo", todo_id) == {
        "/title": (normalize("更新推送配置"), _tokens(engine, tenant, "更新推送配置"), 2)}


def test_a_long_transcript_is_stored_in_the_artifact_store_and_reads_back_equal(
    client: TestClient, engine: Engine, settings: Settings, alice: tuple[str, str]
) -> None:
    tenant, key = alice
    rid = _rid()
    line = "王设计：我们把提醒补发改成通知兜底，下周三前出方案。Li: agreed, ship the fallback first.\n"
    body = (line * (120_000 // len(line) + 1))[:120_000]
    transcript = {"title": "提醒方案评审 转写", "language": "zh-CN", "recorded_at": "2026-07-14T14:00:00+08:00",
                  "episode": "episode:ep-1", "text": body,
                  "segments": [{"speaker": "王设计", "start_ms": 0, "end_ms": 4200, "text": line.strip()}]}
    written = client.put(f"/records/transcript/{rid}", json={"data": transcript}, headers=auth(key))
    assert written.status_code == 201, written.text
    read = client.get(f"/records/transcript/{rid}", headers=auth(key)).json()
    assert read["data"] == transcript
    text_json = encode(body)
    [long_field] = read["long_fields"]  # the short segments stay in PostgreSQL
    assert (long_field["path"], long_field["characters"]) == ("/text", len(text_json))
    stored = read_artifact(record_store(settings.artifact_root(engine), tenant), long_field["sha256"])
    assert json.loads(stored) == body and long_field["size_bytes"] == len(stored)
    with tenant_session(engine, tenant) as session:
        row = session.execute(text("SELECT data FROM resource_records WHERE resource = 'transcript'"
                                   " AND record_id = :id"), {"id": rid}).scalar_one()
    assert "text" not in row and row["title"] == transcript["title"]
    assert _projection(engine, tenant, "transcript", rid)["/text"][0] == normalize(body)
    # The same data again is a replay; under the threshold the body comes back inline.
    assert client.put(f"/records/transcript/{rid}", json={"data": transcript},
                      headers=auth(key)).json()["replayed"] is True
    short = {**transcript, "text": line}
    assert _put(client, key, f"transcript/{rid}", short, expected_version=1).json()["version"] == 2
    again = client.get(f"/records/transcript/{rid}", headers=auth(key)).json()
    assert again["data"] == short and again["long_fields"] == []


def test_a_field_too_large_for_the_search_index_is_refused_with_its_path(
    client: TestClient, engine: Engine, alice: tuple[str, str]
) -> None:
    """100,000 distinct words are 1.2 MB of lexemes, over what one tsvector holds: a typed 422, nothing stored."""
    tenant, key = alice
    rid = _rid()
    words = " ".join(f"w{i:06d}x" for i in range(100_000))
    refused = _put(client, key, f"transcript/{rid}", {"title": "t", "text": words})
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == "field_too_large_to_index"
    assert refused.json()["error"]["details"] == {"path": "/text"}
    assert client.get(f"/records/transcript/{rid}", headers=auth(key)).status_code == 404
    assert _projection(engine, tenant, "transcript", rid) == {}


def test_the_readmes_put_records_example_creates_the_todo_it_shows(client: TestClient, make_key: MakeKey) -> None:
    """The README's example body, sent as written (issue 24, item 10: there was none)."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = re.search(r"<!-- readme:put-record -->\n```bash\n(.*?)```", readme, re.S)
    assert block, "the README lost its PUT /records example"
    put = re.search(r"-X PUT localhost:8000(/records/\S+) .*?-d '(.*?)'", block.group(1), re.S)
    assert put, block.group(1)
    path, body = put.group(1), json.loads(put.group(2))
    key = make_key()
    created = client.put(path, json=body, headers=auth(key))
    assert created.status_code == 201, created.text
    assert created.json()["version"] == 1
    read = client.get(path, headers=auth(key))
    assert read.status_code == 200 and read.json()["data"] == body["data"], read.text
    changed = client.put(path, json={**body, "data": {**body["data"], "status": "done"}, "expected_version": 1},
                         headers=auth(key))
    assert changed.status_code == 200 and changed.json()["version"] == 2, changed.text
