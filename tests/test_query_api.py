"""POST /memory-query (lexical): hard filters before candidates, Chinese without spaces."""

from fastapi.testclient import TestClient

from tests.conftest import MakeKey, auth
from tests.factories import candidate


def _ids(response_json: dict) -> list[str]:  # type: ignore[type-arg]
    return [item["memory_id"] for item in response_json["items"]]


def _write(client: TestClient, key: str, content: str, **overrides: object) -> str:
    response = client.post("/memory-candidates", json=candidate(content, **overrides), headers=auth(key))
    assert response.status_code == 201, response.text
    return str(response.json()["memory_id"])


def test_chinese_text_is_found_by_a_chinese_query_without_spaces(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    target = _write(client, key, "用户每月五号需要提交销售报告给财务部门")
    _write(client, key, "用户喜欢在周末爬山")
    found = client.post("/memory-query", json={"query": "销售报告"}, headers=auth(key)).json()
    assert _ids(found) == [target]
    item = found["items"][0]
    assert item["score"] > 0
    assert {"lexical", "trigram", "semantic", "recency", "authority"} <= set(item["score_breakdown"])
    assert item["score_breakdown"]["lexical"] > 0


def test_english_and_mixed_queries(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    target = _write(client, key, "Prefers reports in Markdown with 图表 embedded")
    assert _ids(client.post("/memory-query", json={"query": "markdown REPORTS"}, headers=auth(key)).json()) == [target]
    assert _ids(client.post("/memory-query", json={"query": "Markdown图表"}, headers=auth(key)).json()) == [target]


def test_another_users_memory_is_never_a_candidate_even_with_identical_text(
    client: TestClient, make_key: MakeKey
) -> None:
    tenant = "t-two-users"
    alice, bob = make_key(tenant=tenant, user="alice"), make_key(tenant=tenant, user="bob")
    mine = _write(client, alice, "我的银行卡尾号是 4321")
    _write(client, bob, "我的银行卡尾号是 4321")
    found = client.post("/memory-query", json={"query": "银行卡尾号"}, headers=auth(alice)).json()
    assert _ids(found) == [mine]
    assert found["candidates_considered"] == 1


def test_only_active_current_and_in_purpose_memories_are_used(client: TestClient, make_key: MakeKey) -> None:
    writer = make_key()
    active = _write(client, writer, "项目代号 蓝鲸 启动")
    _write(client, writer, "项目代号 蓝鲸 已经过期", validity={"expires_at": "2020-01-01T00:00:00Z"})
    _write(client, writer, "项目代号 蓝鲸 尚未生效", validity={"effective_from": "2099-01-01T00:00:00Z"})
    _write(client, writer, "项目代号 蓝鲸 已结束", validity={"effective_to": "2021-01-01T00:00:00Z"})
    restricted = _write(client, writer, "项目代号 蓝鲸 仅用于计费", allowed_purposes=["billing"])
    candidate_only = client.post(
        "/memory-candidates", json=candidate("项目代号 蓝鲸 推测", source_level="E4"), headers=auth(writer)
    ).json()
    assert candidate_only["status"] == "CANDIDATE"
    plain = client.post("/memory-query", json={"query": "蓝鲸"}, headers=auth(writer)).json()
    assert _ids(plain) == [active]
    billing = client.post("/memory-query", json={"query": "蓝鲸", "purpose": "billing"}, headers=auth(writer)).json()
    assert sorted(_ids(billing)) == sorted([active, restricted])


def test_session_memories_only_within_their_session(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    in_session = _write(client, key, "这次会话用英文回答", space="SESSION", session_id="s-9")
    assert _ids(client.post("/memory-query", json={"query": "英文回答"}, headers=auth(key)).json()) == []
    found = client.post("/memory-query", json={"query": "英文回答", "session_id": "s-9"}, headers=auth(key)).json()
    assert _ids(found) == [in_session]


def test_ordering_is_stable_for_the_same_input(client: TestClient, make_key: MakeKey) -> None:
    key = make_key()
    for n in range(6):
        _write(client, key, f"季度复盘会议纪要 第{n}份")
    orders = {
        tuple(_ids(client.post("/memory-query", json={"query": "复盘会议", "limit": 10}, headers=auth(key)).json()))
        for _ in range(3)
    }
    assert len(orders) == 1
    assert len(next(iter(orders))) == 6


def test_empty_result_is_a_valid_answer(client: TestClient, make_key: MakeKey) -> None:
    response = client.post("/memory-query", json={"query": "完全无关的问题"}, headers=auth(make_key()))
    assert response.status_code == 200
    assert response.json()["items"] == []


def test_a_query_of_only_punctuation_is_rejected(client: TestClient, make_key: MakeKey) -> None:
    response = client.post("/memory-query", json={"query": "？！。"}, headers=auth(make_key()))
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "empty_query"


def test_a_misspelt_word_is_found_by_its_trigrams_when_full_text_finds_too_little(
    client: TestClient, make_key: MakeKey
) -> None:
    key = make_key()
    target = _write(client, key, "Kickoff of Project Bluewhale on Monday")
    _write(client, key, "The user likes green tea")
    found = client.post("/memory-query", json={"query": "Bluewhael", "retrieval": "lexical"}, headers=auth(key)).json()
    assert _ids(found) == [target]
    assert found["items"][0]["matched_by"] == ["trigram"]
    assert found["items"][0]["score_breakdown"]["trigram"] > 0
