"""The query-embedding lanes are the app's: sized from the settings it was created with, stopped with it.

Before, they were module globals of the recall router, sized from ``Settings()`` at import time: an app
created with ``query_embedding_engines=1`` still had the default two lanes, and neither the lanes nor
their engine children ever stopped.
"""

from __future__ import annotations

import threading
from pathlib import Path

from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from tests.conftest import MakeKey, auth


def _lanes() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name.startswith("mnemo-embed-")}


def _alive(pid: int) -> bool:
    """Running: a process that exited is gone, or a zombie until it is reaped."""
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def test_an_app_has_the_lanes_of_its_settings_and_stops_them_and_their_engines(
    settings: Settings, make_key: MakeKey
) -> None:
    before = _lanes()
    key = make_key()
    with TestClient(create_app(settings.model_copy(update={"query_embedding_engines": 1}))) as api:
        lanes = _lanes() - before
        assert len(lanes) == 1
        for query in ("上海", "天气怎么样", "where do I live"):  # hybrid: each embeds its query on the app's lane
            response = api.post("/memory-query", json={"query": query}, headers=auth(key))
            assert response.status_code == 200, response.text
        engines = api.app.state.embedding_lanes.engine_pids  # type: ignore[attr-defined]
        assert len(engines) == 1 and _alive(engines[0])
    assert not any(lane.is_alive() for lane in lanes)
    assert not any(_alive(pid) for pid in engines)
