"""Cursor misuse through the real app: each its own typed error (seed 000 §5), and strict request bodies."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from api.main import create_app
from api.settings import Settings
from memory.errors import NotFound
from memory.resources.cursors import (
    Binding,
    CursorInvalid,
    CursorKeyError,
    CursorKeys,
    CursorPastEnd,
    PermissionsChanged,
    issue,
    redeem,
)
from memory.resources.declarations import Operation
from tests.conftest import MakeKey, auth
from tests.resources.reader_support import agent_access, allow, error, new_key, put, read, reader, tenant

MEMO = {"title": "语音笔记", "recorded_at": "2026-06-01T09:00:00Z", "text": "笔记正文🙂 " * 12_000}


def read_with(client: TestClient, key: str, ref: str, cursor: str) -> Any:
    return client.post("/resources/read", json={"ref": ref, "cursor": cursor}, headers=auth(key))


@pytest.fixture
def memo(client: TestClient, make_key: MakeKey) -> tuple[str, str, str]:
    """A tenant, its user's key and the cursor of the second page of a long voice memo."""
    tenant_id = tenant()
    key = new_key(make_key, tenant_id)
    put(client, key, "voice_memo:m", MEMO)
    put(client, key, "voice_memo:other", MEMO)
    first = read(client, key, ref="voice_memo:m")
    assert first["complete"] is False
    return tenant_id, key, first["next_cursor"]


def test_a_tampered_or_garbled_cursor(client: TestClient, memo: tuple[str, str, str]) -> None:
    _, key, cursor = memo
    key_id, payload, mac = cursor.split(".")
    flipped = payload[:10] + ("A" if payload[10] != "A" else "B") + payload[11:]
    for bad in (f"{key_id}.{flipped}.{mac}", "garbage", f"other.{payload}.{mac}", cursor + "x"):
        assert error(read_with(client, key, "voice_memo:m", bad), 422) == "cursor_invalid"
    assert read_with(client, key, "voice_memo:m", cursor).status_code == 200


def test_another_users_cursor(client: TestClient, make_key: MakeKey, memo: tuple[str, str, str]) -> None:
    tenant_id, _, cursor = memo
    for stranger in (new_key(make_key, tenant_id, user="bob"), new_key(make_key, user="alice")):
        assert error(read_with(client, stranger, "voice_memo:m", cursor), 422) == "cursor_other_user"


def test_another_callers_cursor(client: TestClient, make_key: MakeKey, memo: tuple[str, str, str]) -> None:
    tenant_id, _, cursor = memo
    agent_key = new_key(make_key, tenant_id, agent="agent-x")
    allow(client, make_key, tenant_id, "agent-x", "voice_memo", "/title", "/text")  # may read: the cursor is refused
    public_key = new_key(make_key, tenant_id, roles=("public_client",))
    for other in (agent_key, public_key):
        assert error(read_with(client, other, "voice_memo:m", cursor), 422) == "cursor_other_caller"


def test_a_cursor_of_another_ref_type_or_operation(client: TestClient, memo: tuple[str, str, str]) -> None:
    _, key, cursor = memo
    assert error(read_with(client, key, "voice_memo:other", cursor), 422) == "cursor_mismatch"
    assert error(read_with(client, key, "contact:c", cursor), 422) == "cursor_mismatch"
    for index in range(21):
        put(client, key, f"todo:l{index}", {"title": f"t{index}", "status": "open"})
    todo_cursor = client.get("/resources/todo", headers=auth(key)).json()["next_cursor"]
    assert todo_cursor is not None
    on_contact = client.get("/resources/contact", params={"cursor": todo_cursor}, headers=auth(key))
    assert error(on_contact, 422) == "cursor_mismatch"
    assert on_contact.json()["error"]["details"]["cursor"] == {"operation": "list", "resource": "todo", "ref": None,
                                                               "same_filters": True}
    assert error(read_with(client, key, "todo:l1", todo_cursor), 422) == "cursor_mismatch"
    assert error(client.get("/resources/voice_memo", params={"cursor": cursor}, headers=auth(key)),
                 422) == "cursor_mismatch"


def test_a_cursor_past_the_end(client: TestClient, memo: tuple[str, str, str]) -> None:
    tenant_id, _, _ = memo
    # The last page issues no cursor; one past the end (here signed by the app's own key) is refused, not empty.
    the_reader = reader(client)
    access = agent_access(tenant_id, "alice", "agent-p", {"voice_memo": ("/title", "/text")})
    binding = Binding(Operation.READ, "voice_memo", "voice_memo:m", {})
    grant = access.grant("voice_memo", Operation.READ)
    first = the_reader.read(access, "voice_memo:m", None).next_cursor
    assert first is not None
    _, mark = redeem(the_reader.keys, first, access, grant, binding)  # this caller's mark of the record, unchanged
    beyond = issue(the_reader.keys, access, grant, binding, 10_000, mark)
    with pytest.raises(CursorPastEnd):
        the_reader.read(access, "voice_memo:m", beyond)


def test_the_source_changed_between_pages(client: TestClient, memo: tuple[str, str, str]) -> None:
    _, key, cursor = memo
    put(client, key, "voice_memo:m", {**MEMO, "title": "改过的笔记"}, version=1)
    changed = read_with(client, key, "voice_memo:m", cursor)
    assert error(changed, 409) == "source_changed"
    assert changed.json()["error"]["details"] == {"current_version": 2}


def test_the_field_set_changed_between_pages(client: TestClient, memo: tuple[str, str, str]) -> None:
    """A revocation between two pages stops the second: the access is recomputed per request."""
    tenant_id, _, _ = memo
    wide = agent_access(tenant_id, "alice", "agent-r", {"voice_memo": ("/title", "/summary", "/text")})
    narrow = agent_access(tenant_id, "alice", "agent-r", {"voice_memo": ("/title", "/text")})
    first = reader(client).read(wide, "voice_memo:m", None)
    assert first.next_cursor is not None
    with pytest.raises(PermissionsChanged):
        reader(client).read(narrow, "voice_memo:m", first.next_cursor)
    gone = agent_access(tenant_id, "alice", "agent-r", {"todo": ("/title",)})
    with pytest.raises(NotFound) as caught:
        reader(client).read(gone, "voice_memo:m", first.next_cursor)
    assert caught.value.code == "unknown_resource"


@pytest.mark.parametrize(("raw", "code"), [
    ('{"query": "x", "colour": "red"}', "unknown_field"),
    ('{"query": "x", "query": "y"}', "duplicate_key"),
    ('{"query": "x", "resource": null}', "null_not_allowed"),
    ('{"query": "x", "top_k": "5"}', "invalid_value"),
    ('{"query": "x", "top_k": 0}', "invalid_value"),
    ('{"query": "   "}', "invalid_query"),
    ('{"query": "x", "user_id": "bob"}', "identity_from_credentials"),
])
def test_strict_search_bodies(client: TestClient, make_key: MakeKey, raw: str, code: str) -> None:
    key = new_key(make_key)
    response = client.post("/resources/search", content=raw.encode(),
                           headers=auth(key) | {"content-type": "application/json"})
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == code


@pytest.mark.parametrize(("raw", "code"), [
    ('{"ref": "todo:x", "cursor": null}', "null_not_allowed"),
    ('{"ref": "todo:x", "page": 2}', "unknown_field"),
    ('{"ref": "todo:x", "ref": "todo:y"}', "duplicate_key"),
    ('{"ref": 5}', "invalid_value"),
    ('{"ref": "todo:x", "cursor": ""}', "invalid_value"),
])
def test_strict_read_bodies(client: TestClient, make_key: MakeKey, raw: str, code: str) -> None:
    key = new_key(make_key)
    response = client.post("/resources/read", content=raw.encode(),
                           headers=auth(key) | {"content-type": "application/json"})
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == code


def test_keys_rotate_the_first_signs_and_every_one_verifies() -> None:
    old_secret, new_secret = "o" * 43, "n" * 43  # base64url of 32 bytes each
    old = CursorKeys.parse(f"old:{old_secret}")
    rotated = CursorKeys.parse(f"new:{new_secret},old:{old_secret}")
    cursor = old.sign({"p": 1})
    assert rotated.verify(cursor) == {"p": 1}
    assert rotated.sign({"p": 2}).startswith("new.")
    with pytest.raises(CursorInvalid):
        CursorKeys.parse(f"new:{new_secret}").verify(cursor)  # the old key retired
    for bad in ("nokey", "a:short", f"a:{new_secret},a:{old_secret}", f"bad id:{new_secret}"):
        with pytest.raises(CursorKeyError):
            CursorKeys.parse(bad)


def test_a_malformed_cursor_key_setting_stops_the_start(settings: Settings) -> None:
    with pytest.raises(CursorKeyError):
        create_app(settings.model_copy(update={"cursor_keys": SecretStr("k1:tooshort")}))
