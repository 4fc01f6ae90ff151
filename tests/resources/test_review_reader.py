"""Review of issue 15's reader: a key reading under an agent's policy cannot go around it through /records, an
oversized title never ends a list early nor hides a hit, reassembly handles long strings inside arrays, and a
refused record is named without its value echoed back."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from memory.resources.pages import PAGE_BYTES, read_page, reassemble
from tests.conftest import MakeKey, auth
from tests.resources.reader_support import allow, error, new_key, put, read, search, tenant

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


def test_a_title_too_long_for_a_page_neither_ends_a_list_early_nor_hides_its_search_hit(
    client: TestClient, make_key: MakeKey
) -> None:
    """An intent's summary (its title) has no declared bound: one of 70,000 characters does not fit a page
    whole. The list still reaches every record, and a search still returns the hit, its title shortened."""
    key = new_key(make_key)
    put(client, key, "intent:i-old", {"action": "create_todo", "status": "proposed", "summary": "old walrus"})
    put(client, key, "intent:i-long", {"action": "create_todo", "status": "proposed",
                                       "summary": "walrus " + "x" * 70_000})
    put(client, key, "intent:i-new", {"action": "create_todo", "status": "proposed", "summary": "new walrus"})
    refs: list[str] = []
    cursor: str | None = None
    for _ in range(5):
        response = client.get("/resources/intent", params={"cursor": cursor} if cursor else {}, headers=auth(key))
        assert response.status_code == 200, response.text
        assert len(response.content) <= PAGE_BYTES
        page = response.json()
        refs += [item["ref"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert refs == ["intent:i-new", "intent:i-long", "intent:i-old"]
    found = search(client, key, query="walrus", resource="intent")
    assert found["omitted"] == 0
    assert sorted(hit["ref"] for hit in found["items"]) == ["intent:i-long", "intent:i-new", "intent:i-old"]
    long_title = next(hit["title"] for hit in found["items"] if hit["ref"] == "intent:i-long")
    assert long_title.startswith("walrus xxx") and long_title.endswith("…") and len(long_title) < 2_000


def _pages(data: dict[str, Any]) -> list[dict[str, Any]]:
    pages: list[dict[str, Any]] = []
    start: int | None = None
    while True:
        page = read_page("episode:e", 1, data, start, lambda position: f"cursor-{position}")
        pages.append(page.model_dump(mode="json"))
        if page.complete:
            return pages
        assert page.next_cursor is not None
        start = int(page.next_cursor.removeprefix("cursor-"))


def test_reassembly_equals_odd_data_long_strings_inside_arrays_included() -> None:
    data = {
        "title": "", "decisions": ["a" * 20_000, "", "中" * 9_000],
        "a/b": {"~": ["x\u2028\"\\\n" * 4_000, [[], ["q" * 9_000]]], "~1": {}},
        "nested": [[["é" * 10_000]], {"k": "v"}], "escapes": "\u0001\t" * 6_000,
    }
    pages = _pages(data)
    assert len(pages) > 1 and all(page["complete"] is (page is pages[-1]) for page in pages)
    assert reassemble(pages) == data


def test_a_long_decision_read_through_the_api_reassembles_to_the_source(client: TestClient, make_key: MakeKey) -> None:
    key = new_key(make_key)
    episode = {"title": "Planning", "summary": "s", "decisions": ["ship " * 4_000, "wait", "回顾" * 30_000]}
    put(client, key, "episode:e1", episode)
    pages = [read(client, key, ref="episode:e1")]
    while not pages[-1]["complete"]:
        pages.append(read(client, key, ref="episode:e1", cursor=pages[-1]["next_cursor"]))
    assert len(pages) > 1
    assert reassemble(pages) == episode


def test_a_refused_record_is_named_without_echoing_its_value(client: TestClient, make_key: MakeKey) -> None:
    """A 900,000-character title (or status) is refused by its path and rule; the answer does not send the value
    back (it did, twice: 1.8 MB)."""
    key = new_key(make_key)
    for data, path in (({"title": "a" * 900_000, "status": "open"}, "/title"),
                       ({"title": "t", "status": "z" * 900_000}, "/status")):
        refused = client.put("/records/todo/long", json={"data": data}, headers=auth(key))
        assert error(refused, 422) == "invalid_value"
        assert len(refused.content) < 4_000
        problems = refused.json()["error"]["details"]["problems"]
        assert [problem["path"] for problem in problems] == [path] and problems[0]["message"].startswith(f"{path}: ")
