"""Every read path a user has to what the wall wrote: what each answered, for the invariants to judge.

Each answer is kept as (what was asked, status, body text); the invariants look for markers in the text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fastapi.testclient import TestClient

from tests.conftest import auth
from tests.wall.model import MARKER, World

RESOURCE_TYPES = ("todo", "memory", "session", "session_summary")


@dataclass(frozen=True)
class Answer:
    path: str
    status: int
    body: Any

    @property
    def markers(self) -> set[str]:
        return set(MARKER.findall(json.dumps(self.body, ensure_ascii=False).lower()))


class Reader:
    """One key's reads."""

    def __init__(self, api: TestClient, key: str, headers: dict[str, str] | None = None) -> None:
        self.api, self.key, self.extra = api, key, headers or {}
        self.answers: list[Answer] = []

    def _keep(self, path: str, response: Any) -> Answer:
        assert response.status_code < 500, f"{path}: {response.status_code} {response.text}"
        body = response.json() if response.content else None
        answer = Answer(path, response.status_code, body)
        self.answers.append(answer)
        return answer

    def get(self, path: str) -> Answer:
        return self._keep(f"GET {path}", self.api.get(path, headers={**auth(self.key), **self.extra}))

    def post(self, path: str, body: dict[str, Any]) -> Answer:
        return self._keep(f"POST {path} {json.dumps(body)}",
                          self.api.post(path, json=body, headers={**auth(self.key), **self.extra}))


def read_everything(reader: Reader, world: World, probes: Iterable[str], own_sessions: set[str]) -> None:
    """Every object the world knows (anyone's), the caller's lists, and a recall and a search per probe."""
    for memory_id in [*world.memories, *world.deleted_memory_ids]:
        reader.get(f"/memories/{memory_id}")
    for session_id, session in world.sessions.items():
        if reader.get(f"/sessions/{session_id}").status == 200 and session_id in own_sessions:
            reader.get(f"/sessions/{session_id}/window?budget_tokens=4000")
            reader.get(f"/sessions/{session_id}/summaries/latest")
            for commit_id in session.commits:
                reader.get(f"/sessions/{session_id}/commits/{commit_id}")
    for record_id in world.records:
        reader.get(f"/records/todo/{record_id}")
    for resource in RESOURCE_TYPES:
        reader.get(f"/resources/{resource}")
    for marker in probes:
        reader.post("/memory-query", {"query": marker, "retrieval": "lexical"})
        reader.post("/resources/search", {"query": marker})
