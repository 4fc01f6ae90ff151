"""`mnemo worker` as the real command writes JSON lines: its start, each workflow and activity outcome with its
type, id, tenant, duration and status, failures with their reason; never memory content or message text.

The one stand-in is the LLM endpoint (tests/sessions/llm_standin.py, a real HTTP server), scripted to refuse the
key so that an activity fails with a reason a person can act on."""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError
from temporalio.worker import Worker

from api.main import create_app
from api.observability.logging import JsonFormatter
from api.observability.worker_logging import OutcomeLogging, keep_tracebacks_out, reason
from api.settings import Settings
from api.temporal import connect
from tests.conftest import MakeKey, auth
from tests.factories import candidate
from tests.observability.probe_workflow import LogProbe, Tenanted
from tests.observability.test_commands import command, json_lines
from tests.sessions.llm_standin import Reply, running_standin
from tests.workers import worker_env

SECRET = "我的保险柜密码藏在蓝色花瓶下面 sapphire-heron-42"


def _wait(what: str, check: Any, timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def _records(log: Path) -> list[dict[str, Any]]:
    return json_lines(log) if log.exists() else []


def test_the_worker_logs_each_outcome_as_json_and_never_content(
    settings: Settings, make_key: MakeKey, tmp_path: Path
) -> None:
    own = settings.model_copy(update={"task_queue": f"worker-logs-{uuid.uuid4().hex[:8]}"})
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    log = tmp_path / "worker.log"
    with running_standin() as standin:
        standin.script(Reply(401, '{"error": {"message": "invalid api key"}}'))
        env = worker_env(own, MNEMO_EXTRACTOR="llm", MNEMO_LLM_BASE_URL=standin.base_url,
                         MNEMO_LLM_MODEL="standin-model", MNEMO_LOG_LEVEL="info")
        env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
        with command(["worker"], env, log) as process, TestClient(create_app(own)) as api:
            _wait("the start line", lambda: any(r["message"] == "worker started" for r in _records(log)))
            assert process.poll() is None
            headers = auth(key)
            memory = api.post("/memory-candidates", json=candidate(SECRET), headers=headers).json()
            api.post("/sessions", json={"session_id": "s-logs"}, headers=headers)
            said = {"idempotency_key": "l1", "role": "user", "content": SECRET,
                    "created_at": "2026-07-14T14:00:00+08:00"}
            assert api.post("/sessions/s-logs/messages", json={"messages": [said]}, headers=headers).status_code in (
                200, 201)
            assert api.post("/sessions/s-logs/commit", json={"commit_id": "c1"}, headers=headers).status_code == 202
            _wait("the commit to end", lambda: api.get("/sessions/s-logs/commits/c1", headers=headers).json()[
                "status"] == "failed_requires_action")
            deletion = api.delete(f"/memories/{memory['memory_id']}", headers=headers)
            assert deletion.status_code == 202, deletion.text
            job = deletion.json()["job_id"]
            _wait("the deletion", lambda: api.get(f"/memory-deletions/{job}", headers=headers).json()[
                "status"] == "completed")
            _wait("the deletion's outcome line", lambda: any(  # the workflow's line: its activities' come before it
                r.get("workflow_type") == "Deletion" and r.get("status") == "completed" and "activity_type" not in r
                for r in _records(log)))

    text = log.read_text(encoding="utf-8")
    records: list[dict[str, Any]] = json_lines(log)  # every line is JSON
    assert "sapphire-heron-42" not in text and "蓝色花瓶" not in text
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    [started] = [r for r in records if r["message"] == "worker started"]
    assert (started["task_queue"], started["namespace"]) == (own.task_queue, own.temporal_namespace)
    assert {"mnemo", "temporalio", "python"} <= set(started["versions"])

    mine = [r for r in records if r.get("tenant_id") == tenant]
    outcome = {"workflow_type", "workflow_id", "status", "duration_ms"}
    commit = [r for r in mine if r.get("workflow_type") == "SessionCommit" and "activity_type" not in r]
    assert commit and all(outcome <= set(r) for r in commit), commit
    failed = [r for r in mine if r.get("activity_type") and r["status"] == "failed"]
    assert failed and all(r["level"] == "warning" and "401" in r["reason"] for r in failed), failed
    assert all({"activity_id", "attempt"} <= set(r) for r in failed)
    deleted = [r for r in mine if r.get("workflow_type") == "Deletion" and "activity_type" not in r]
    assert [r["status"] for r in deleted] == ["completed"] and deleted[0]["duration_ms"] > 0
    done = [r for r in mine if r.get("activity_type") and r["status"] == "completed"]
    assert {r["workflow_type"] for r in done} >= {"SessionCommit", "Deletion"}
    assert all(isinstance(r["duration_ms"], float | int) for r in mine)
    assert all(r["queued_ms"] >= 0 for r in mine if r.get("activity_type")), mine  # the wait for a worker slot
    [verified] = [r for r in mine if r["message"] == "verification round"]  # where its time went, per part
    assert (verified["jobs"], verified["clean"]) == (1, 1) and {"rows_ms", "histories_ms", "checks_ms"} <= set(verified)
    ours = [r for r in records if r.get("workflow_id") in {c["workflow_id"] for c in commit + deleted}]
    assert all(r.get("tenant_id") == tenant for r in ours), ours  # every line of their activities names it


def test_a_database_failure_is_reasoned_by_its_sqlstate_never_by_the_value_it_quotes(engine: Engine) -> None:
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT CAST(:value AS integer)"), {"value": SECRET})
    except DBAPIError as error:
        refused = error
    else:
        raise AssertionError("PostgreSQL cast the secret to an integer")
    assert "蓝色花瓶" in str(refused.orig)  # PostgreSQL's own message quotes the value...
    assert "[parameters:" not in str(refused) or "hidden" in str(refused)  # ...the engine never adds it
    wrapped = RuntimeError("the purge step failed")
    wrapped.__cause__ = refused
    said = reason(wrapped)
    assert said == "RuntimeError: the purge step failed <- InvalidTextRepresentation (SQLSTATE 22P02)", said


def test_the_sdks_failed_activity_line_loses_its_traceback_unless_debugging(caplog: pytest.LogCaptureFixture) -> None:
    keep_tracebacks_out()
    sdk = logging.getLogger("temporalio.activity")
    try:
        raise ValueError(SECRET)
    except ValueError:
        with caplog.at_level(logging.INFO, logger="mnemo.worker"):
            sdk.warning("Completing activity as failed", exc_info=True)
    [record] = [r for r in caplog.records if r.name == "temporalio.activity"]
    assert record.exc_info is None and SECRET not in JsonFormatter().format(record)


def test_a_replayed_and_evicted_workflow_logs_its_outcome_once(
    settings: Settings, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An evicted workflow's coroutine is closed (GeneratorExit) outside its event loop, often by the garbage
    collector: the interceptor must let that pass, not log (it once raised there, "Exception ignored")."""
    queue = f"log-probe-{uuid.uuid4().hex[:8]}"
    unraisable: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda hook: unraisable.append(repr(hook.exc_value)))

    async def scenario() -> str:
        client = await connect(settings)
        async with Worker(client, task_queue=queue, workflows=[LogProbe], interceptors=[OutcomeLogging()],
                          max_cached_workflows=0):
            done = await client.execute_workflow(LogProbe.run, Tenanted("t-probe"), id=queue, task_queue=queue)
        async with Worker(client, task_queue=queue, workflows=[LogProbe], interceptors=[OutcomeLogging()]):
            waiting = await client.start_workflow(LogProbe.run, Tenanted("t-probe", 3600), id=f"{queue}-open",
                                                  task_queue=queue)
            while not any(e.HasField("timer_started_event_attributes") for e in
                          (await waiting.fetch_history()).events[-3:]):
                await asyncio.sleep(0.05)
        await waiting.terminate()  # the worker stopped with it cached and open: its coroutine is dropped
        return done

    with caplog.at_level(logging.DEBUG, logger="mnemo.worker"):
        assert asyncio.run(scenario()) == "t-probe"
        gc.collect()
    lines = [r for r in caplog.records if r.name == "mnemo.worker" and getattr(r, "workflow_id", None) == queue]
    assert [(r.getMessage(), r.__dict__["tenant_id"]) for r in lines] == [("workflow completed", "t-probe")]
    assert lines[0].__dict__["duration_ms"] >= 100  # workflow time: the two timers, not the last task alone
    assert unraisable == []
