"""Commits that start by themselves: after enough messages (at once, from the API) and after idle time
(from the workers' sweep Schedule's workflow), with a real worker and Temporal."""

from __future__ import annotations

import asyncio
import time
import uuid

from fastapi.testclient import TestClient
from sqlalchemy import Engine

from api.devstack.postgres import PostgresInfo
from api.main import create_app
from api.settings import Settings
from api.temporal import connect
from memory.sessions.policy import CommitPolicy
from tests.conftest import auth
from tests.factories import key_in, scratch_stack
from tests.sessions.conftest import post, say, wait_commit
from tests.workers import ThreadWorker
from workflows.session_commit import SessionCommitSweepWorkflow, SessionSweepInput


def test_enough_messages_start_a_commit_and_an_idle_session_is_committed_by_the_sweep(
    settings: Settings, postgres: PostgresInfo
) -> None:
    """On a database of its own: the sweep commits every tenant's idle session, which on the session's database
    are all the sessions the tests before this one left open."""
    with scratch_stack(settings, postgres, "mnemo_policy") as (scratch, engine):
        _messages_then_idle(scratch, engine)


def _messages_then_idle(scratch: Settings, engine: Engine) -> None:
    own = scratch.model_copy(update={"session_commit_after_messages": 3, "session_commit_after_tokens": 0})
    worker = ThreadWorker(own, engine, own.task_queue, artifacts=own.artifact_root(engine),
                          commit_policy=CommitPolicy(after_messages=0, after_tokens=0, idle_seconds=1)).start()
    try:
        with TestClient(create_app(own)) as client:
            key = key_in(engine, f"t-{uuid.uuid4().hex[:12]}")
            client.post("/sessions", json={"session_id": "s-vol"}, headers=auth(key))
            two = client.post("/sessions/s-vol/messages", json={"messages": [
                say("v1", "user", "我住在成都。"), say("v2", "assistant", "好的。")]}, headers=auth(key)).json()
            assert two["commit"] is None
            three = client.post("/sessions/s-vol/messages", json={"messages": [say("v3", "user", "谢谢")]},
                                headers=auth(key)).json()
            assert three["commit"]["commit_id"] == "auto-1-3" and three["commit"]["trigger"] == "policy:messages"
            done = wait_commit(client, key, "s-vol", "auto-1-3")
            assert done["trigger"] == "policy:messages" and done["memories"]["created"]

            post(client, key, "s-idle", say("i1", "user", "I live in Lisbon."))
            assert client.get("/sessions/s-idle/commits/auto-1-1", headers=auth(key)).status_code == 404
            time.sleep(1.5)

            async def sweep() -> int:
                temporal = await connect(own)
                return int(await temporal.execute_workflow(
                    SessionCommitSweepWorkflow.run, SessionSweepInput(), id=f"sweep-{uuid.uuid4().hex[:8]}",
                    task_queue=own.task_queue,
                ))

            assert asyncio.run(sweep()) >= 1
            idle = wait_commit(client, key, "s-idle", "auto-1-1")
            assert idle["trigger"] == "policy:idle"
            assert idle["memories"]["merged"]  # Lisbon supersedes Chengdu (profile.city)
    finally:
        worker.stop()
