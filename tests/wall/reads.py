"""Every read path a user has to what the wall wrote: what each answered, for the invariants to judge.

Each answer is kept as (what was asked, status, body text); the invariants look for markers in the text.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from typing import Any

from fastapi.testclient import TestClient

from tests.conftest import auth
from tests.wall.model import MARKER, Owner, World
from tests.wall.stats import STATS

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
        started = time.monotonic()
        answer = self._keep(f"GET {path}", self.api.get(path, headers={**auth(self.key), **self.extra}))
        kind = path.split("?")[0].split("/")[: 3 if path.startswith("/resources/") else 2]
        STATS.seconds["GET " + "/".join(kind)] += time.monotonic() - started
        return answer

    def post(self, path: str, body: dict[str, Any]) -> Answer:
        started = time.monotonic()
        answer = self._keep(f"POST {path} {json.dumps(body)}",
                            self.api.post(path, json=body, headers={**auth(self.key), **self.extra}))
        STATS.seconds["POST " + path] += time.monotonic() - started
        return answer


def read_everything(reader: Reader, world: World, owner: Owner, probes: list[str], rng: random.Random,
                    searches: bool) -> None:
    """The caller's own objects and some of everyone else's (each foreign object by one other user a step, on
    average); with ``searches``, the caller's lists, and a recall and a search for the probes (words none of
    which the caller may find: deleted texts' markers and other users' markers)."""

    def mine_or_sampled(whose: Owner) -> bool:
        return whose == owner or rng.random() < 0.5

    for memory_id, memory in world.memories.items():
        if mine_or_sampled(memory.owner):
            reader.get(f"/memories/{memory_id}")
    for memory_id in world.deleted_memory_ids - world.memories.keys():  # lost to a restore: still deleted
        reader.get(f"/memories/{memory_id}")
    for session_id, session in world.sessions.items():
        if mine_or_sampled(session.owner) and reader.get(f"/sessions/{session_id}").status == 200 \
                and session.owner == owner:
            reader.get(f"/sessions/{session_id}/window?budget_tokens=4000")
            reader.get(f"/sessions/{session_id}/summaries/latest")
            for commit_id in session.commits:
                reader.get(f"/sessions/{session_id}/commits/{commit_id}")
    for record_id, record in world.records.items():
        if mine_or_sampled(record.owner):
            reader.get(f"/records/todo/{record_id}")
    if not searches:
        return
    for resource in RESOURCE_TYPES:
        reader.get(f"/resources/{resource}")
    query = " ".join(probes)  # any of the words matches (full text ORs the query's terms)
    if query:
        reader.post("/memory-query", {"query": query, "retrieval": "lexical"})
        reader.post("/resources/search", {"query": query, "top_k": 50})
