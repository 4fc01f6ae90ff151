"""read through the real app and PostgreSQL: short records whole, a 120k-character transcript page by page within
65,536 bytes as sent and reassembled exactly, nested field projection, the same 404 for a foreign or missing record,
and the public catalog."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from memory.resources import pointers
from tests.conftest import MakeKey, auth
from tests.resources.reader_support import agent_access, error, new_key, put, read, reader, tenant


def long_text(characters: int) -> str:
    """Mixed Chinese, English, emoji (two UTF-16 units each), quotes, backslashes, newlines and a control character."""
    parts = ["会议讨论了移动端提醒的补发策略。", "We agreed to ship the fallback first. ", "🙂👩‍💻", '"quoted" \\ ',
             "\n", "\u0001", "第二段：通知兜底与推送配置。"]
    out, index = [], 0
    total = 0
    while total < characters:
        piece = parts[index % len(parts)] + str(index)
        out.append(piece)
        total += len(piece)
        index += 1
    return "".join(out)[:characters]


def reassemble(pages: list[dict[str, Any]]) -> dict[str, Any]:
    """The client's side of seed 000 §5: set each fragment at its path; a piece with an offset extends its string."""
    data: dict[str, Any] = {}
    for page in pages:
        for fragment in page["fragments"]:
            *parents, last = pointers.parse(fragment["path"])
            node: Any = data
            for token in parents:
                node = node[int(token)] if isinstance(node, list) else node[token]
            value, offset = fragment["value"], fragment.get("offset")
            if isinstance(node, list):
                assert int(last) == len(node) and offset in (None, 0)
                node.append(value)
            elif offset:
                assert len(node[last]) == offset
                node[last] += value
            else:
                node[last] = value
    return data


def test_a_short_record_is_read_whole(client: TestClient, make_key: MakeKey) -> None:
    key = new_key(make_key)
    todo = {"title": "更新推送配置", "status": "open", "notes": "n"}
    put(client, key, "todo:s", todo)
    assert read(client, key, ref="todo:s") == {"ref": "todo:s", "version": 1, "complete": True, "data": todo,
                                                "fragments": None, "next_cursor": None}


def test_a_120k_character_transcript_is_read_to_the_end_in_pages_within_65536_bytes(
    client: TestClient, make_key: MakeKey,
) -> None:
    key = new_key(make_key)
    transcript = {
        "title": "移动端提醒评审 · 全文", "language": "zh-CN", "recorded_at": "2026-06-01T09:00:00+08:00",
        "text": long_text(120_000),
        "segments": [{"speaker": f"S{i % 3}", "start_ms": i * 1000, "end_ms": i * 1000 + 900,
                      "text": long_text(40 + i % 700)} for i in range(300)],
    }
    put(client, key, "transcript:long", transcript)
    pages: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        body = {"ref": "transcript:long"} | ({"cursor": cursor} if cursor else {})
        response = client.post("/resources/read", json=body, headers=auth(key))
        assert response.status_code == 200, response.text
        assert len(response.content) <= 65_536
        page = response.json()
        assert page["data"] is None and page["version"] == 1
        pages.append(page)
        cursor = page["next_cursor"]
        assert page["complete"] is (cursor is None)
        if cursor is None:
            break
    assert len(pages) >= 4  # 120k characters of mostly 3-byte text cannot fit fewer
    assert all(len(json.dumps(page, ensure_ascii=False).encode()) > 40_000 for page in pages[:-1])  # pages are full
    assert reassemble(pages) == transcript
    # The text's pieces say where they start, in characters (an emoji is one character, not two UTF-16 units).
    offsets = [f["offset"] for page in pages for f in page["fragments"] if f["path"] == "/text"]
    assert offsets[0] == 0 and offsets == sorted(offsets) and len(offsets) > 1


def test_nested_fields_are_projected_by_their_paths(client: TestClient, make_key: MakeKey) -> None:
    tenant_id = tenant()
    key = new_key(make_key, tenant_id)
    episode = {"title": "评审", "summary": "结论", "participants": [
        {"display_name": "王设计", "contact": "contact:wang", "role": "designer"},
        {"display_name": "李工", "role": "engineer"}]}
    put(client, key, "episode:e", episode)
    names_only = agent_access(tenant_id, "alice", "agent-n", {"episode": ("/title", "/participants/*/display_name")})
    page = reader(client).read(names_only, "episode:e", None)
    entry = reader(client).directory(names_only).resources[0]
    assert (entry.type, entry.operations, entry.fields) == ("episode", ["list", "search", "read"],
                                                           ["/participants/*/display_name", "/title"])
    assert page.data == {"title": "评审", "participants": [{"display_name": "王设计"}, {"display_name": "李工"}]}
    public = new_key(make_key, tenant_id, roles=("public_client",))
    assert read(client, public, ref="episode:e")["data"] == {
        "title": "评审", "summary": "结论", "participants": [{"display_name": "王设计"}, {"display_name": "李工"}]}


def test_another_tenants_or_users_record_is_the_404_of_a_missing_one(client: TestClient, make_key: MakeKey) -> None:
    tenant_id = tenant()
    owner = new_key(make_key, tenant_id)
    put(client, owner, "todo:secret", {"title": "机密", "status": "open"})
    for stranger in (new_key(make_key), new_key(make_key, tenant_id, user="bob")):
        foreign = client.post("/resources/read", json={"ref": "todo:secret"}, headers=auth(stranger))
        missing = client.post("/resources/read", json={"ref": "todo:nowhere"}, headers=auth(stranger))
        assert foreign.status_code == missing.status_code == 404
        assert foreign.json() == json.loads(missing.text.replace("nowhere", "secret"))
    assert error(client.post("/resources/read", json={"ref": "todo"}, headers=auth(owner)), 422) == "invalid_ref"


def test_a_public_key_never_reads_internal_types(client: TestClient, make_key: MakeKey) -> None:
    tenant_id = tenant()
    key = new_key(make_key, tenant_id)
    public = new_key(make_key, tenant_id, roles=("public_client",))
    put(client, key, "transcript:t", {"title": "t", "text": "原话"})
    put(client, key, "user_profile:me", {"display_name": "我"})
    put(client, key, "todo:t", {"title": "t", "status": "open", "notes": "内部"})
    for ref in ("transcript:t", "user_profile:me", "digest:none", "intent:none"):
        assert error(client.post("/resources/read", json={"ref": ref}, headers=auth(public)), 404) == "unknown_resource"
    assert read(client, public, ref="todo:t")["data"] == {"title": "t", "status": "open"}
