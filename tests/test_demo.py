"""The memory part of `mnemo dev`'s demo really recalls what it wrote (through the real API)."""

import pytest
from fastapi.testclient import TestClient

from api.cli.demo.memory import DEMO_MEMORY, memory_demo
from tests.conftest import MakeKey, auth


def test_the_demo_recalls_its_memory_and_replays_on_a_second_run(
    client: TestClient, make_key: MakeKey, capsys: pytest.CaptureFixture[str]
) -> None:
    client.headers.update(auth(make_key(roles=("admin",))))
    try:
        first = memory_demo(client)
        second = memory_demo(client)
    finally:
        del client.headers["Authorization"]
    assert [item["content"] for item in first] == [DEMO_MEMORY["content"]]
    assert [item["memory_id"] for item in second] == [item["memory_id"] for item in first]
    out = capsys.readouterr().out
    assert "demo: written memory" in out and "demo: replayed memory" in out
