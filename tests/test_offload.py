"""The CPU pool (memory.offload): heavy work runs in other processes at a lower priority, with the same result as in
place, and a pool whose process died is replaced."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from api.devstack.processes import pid_alive
from api.settings import Settings
from memory import offload
from memory.artifact_store.postgres import PostgresArtifactStore
from memory.db import make_engine, tenant_session
from memory.deletion.deleted_texts import fingerprint_columns
from memory.identity.auth import authenticated_session
from memory.resources.search import OFFLOAD_FROM_TERMS, parse_query
from memory.sessions.messages import MessageRole, StageMessage
from memory.sessions.recent import OFFLOAD_FROM_MESSAGES, OFFLOAD_FROM_TOKENS, state_of, window_of
from memory.sessions.state import derive_state
from memory.sessions.window import build_window
from tests.conftest import MakeKey, auth
from tests.resources.reader_support import put, search
from tests.sessions.conftest import post, say


def _where() -> tuple[int, int]:
    return os.getpid(), os.getpriority(os.PRIO_PROCESS, 0)


def _scheduling_class() -> int:
    return os.sched_getscheduler(0)


def _die() -> None:
    os._exit(3)


@pytest.fixture(scope="module")
def pool() -> Iterator[offload.CpuPool]:
    started = offload.CpuPool(1, 7)
    yield started
    started.close()


def test_work_runs_in_another_process_at_a_lower_priority(pool: offload.CpuPool) -> None:
    pid, priority = pool.run(_where)
    assert pid != os.getpid()
    assert priority == min(19, os.getpriority(os.PRIO_PROCESS, 0) + 7)


def test_pool_processes_are_in_the_idle_scheduling_class_unless_told_otherwise(pool: offload.CpuPool) -> None:
    assert pool.run(_scheduling_class) == os.SCHED_IDLE  # any waking request preempts the pool's work at once
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the caller's own class is untouched
    niced_only = offload.CpuPool(1, 2, idle=False)
    try:
        assert niced_only.run(_scheduling_class) == os.SCHED_OTHER
        assert niced_only.run(_where)[1] == min(19, os.getpriority(os.PRIO_PROCESS, 0) + 2)
    finally:
        niced_only.close()


def test_a_pool_whose_processes_cannot_enter_the_idle_class_fails_its_start_with_the_setting_to_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(offload, "IDLE_CLASS", os.SCHED_BATCH)  # a class the processes do not end up in
    refused = offload.CpuPool(1, 0)
    with pytest.raises(offload.PoolPriorityRefused, match="MNEMO_CPU_POOL_IDLE=false"):
        refused.warm()
    if not offload.pooled():  # start() with no pool yet: the refusal leaves none, and counts no user
        users = offload._users
        with pytest.raises(offload.PoolPriorityRefused):
            offload.start(1, 0)
        assert not offload.pooled() and offload._users == users


def _slow(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


def test_work_the_pool_does_not_answer_within_the_callers_patience_is_pool_busy(pool: offload.CpuPool) -> None:
    with pytest.raises(offload.PoolBusy, match=r"no answer within 0\.2 s"):
        pool.run(_slow, 2.0, patience=0.2)
    assert pool.run(_slow, 0.0, patience=30) == 0.0  # the pool itself is fine: a patient caller gets the answer


def test_a_dead_pool_process_is_replaced_and_the_work_retried(pool: offload.CpuPool) -> None:
    before, _ = pool.run(_where)
    with pytest.raises(BrokenProcessPool):  # the work itself kills its process: retried once, and it dies again
        pool.run(_die)
    after, _ = pool.run(_where)
    assert after != before


def test_an_exception_of_the_work_is_raised_to_the_caller(pool: offload.CpuPool) -> None:
    with pytest.raises(ValueError, match="invalid literal"):
        pool.run(int, "not a number")


def test_inline_work_runs_in_place_and_a_pool_lasts_until_its_last_user_stops() -> None:
    already = offload.pooled()  # an app of this test process may have started one (its lifespan is a user)
    started = offload.start(1, 3)
    try:
        assert started is not None and offload.pooled()
        assert offload.run(_where)[0] != os.getpid()
        assert offload.run(_where, inline=True)[0] == os.getpid()
    finally:
        offload.stop()
    assert offload.pooled() is already
    if not already:  # no pool: everything runs in place
        assert offload.run(_where)[0] == os.getpid()


def _window(messages: tuple[StageMessage, ...], budget: int) -> dict[str, Any]:
    return build_window(messages, budget_tokens=budget, state=derive_state(messages, task_id="task-1")).as_json()


def _messages(n: int) -> tuple[StageMessage, ...]:
    at = datetime(2026, 7, 1, tzinfo=UTC)
    return tuple(StageMessage(str(i), i, MessageRole.USER if i % 2 else MessageRole.ASSISTANT,
                              f"第{i}条 预算 上海 出差 message {i} " * 5, at) for i in range(1, n + 1))


def test_a_window_and_a_deletions_fingerprints_are_the_same_in_the_pool(pool: offload.CpuPool) -> None:
    messages = _messages(400)
    assert pool.run(_window, messages, 3_000) == _window(messages, 3_000)
    texts, kept = [m.content for m in messages[:5]], [m.content for m in messages[5:]]
    salt = b"0123456789abcdef"
    in_pool, in_place = pool.run(fingerprint_columns, salt, texts, kept), fingerprint_columns(salt, texts, kept)
    assert in_place[2]  # the texts have fingerprints to compare
    assert sorted(zip(*in_pool, strict=True)) == sorted(zip(*in_place, strict=True))  # as rows (sets: any order)


def test_a_large_window_through_the_api_is_made_in_the_pool_as_it_would_be_in_place(
    client: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    """The API started its pool: a window of OFFLOAD_FROM_TOKENS or more is read and made there, the same window
    as in place; another user's session is the same 404 from there."""
    assert offload.pooled()
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key, other = make_key(tenant=tenant), make_key(tenant=tenant, user="bob")
    for start in (0, 300):
        post(client, key, "long", *(say(f"m{n}", "user" if n % 2 else "assistant", f"第{n}条：预算 上海 出差 {n} " * 8)
                                    for n in range(start, start + 300)))
    budget = OFFLOAD_FROM_TOKENS + 1_000
    answered = client.get(f"/sessions/long/window?budget_tokens={budget}", headers=auth(key))
    assert answered.status_code == 200, answered.text
    with authenticated_session(engine, key) as (session, principal):
        in_place = window_of(session, principal, "long", budget)
    assert answered.json() == in_place
    assert len(in_place["messages"]) > 100  # a window of substance
    missing = client.get(f"/sessions/long/window?budget_tokens={budget}", headers=auth(other))
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found", missing.text

    # The state of a session of OFFLOAD_FROM_MESSAGES or more is derived there too, as in place.
    read = client.get("/sessions/long", headers=auth(key))
    assert read.status_code == 200 and read.json()["messages"] == 600 >= OFFLOAD_FROM_MESSAGES, read.text
    with authenticated_session(engine, key) as (session, principal):
        state, profile = state_of(session, principal, "long")
    assert (read.json()["state"], read.json()["profile"]) == (state, profile)
    assert set(state) >= {"active_task_id", "active_entities", "pending_questions"}, state
    assert client.get("/sessions/long", headers=auth(other)).status_code == 404


def in_place(engine: Engine, tenant_id: str, fn: Any, /, *args: object, inline: bool = False) -> Any:
    """:func:`offload.in_tenant` as if the process had no pool: the work on the caller's engine."""
    with tenant_session(engine, tenant_id) as session:
        return fn(session, *args)


def test_a_long_resource_search_is_made_in_the_pool_as_in_place_and_a_short_one_in_place(
    client: TestClient, make_key: MakeKey, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[str] = []
    real = offload.in_tenant

    def watched(engine: Engine, tenant_id: str, fn: Any, /, *args: object, inline: bool = False) -> Any:
        if not inline:
            sent.append(fn.__name__)
        return real(engine, tenant_id, fn, *args, inline=inline)

    monkeypatch.setattr(offload, "in_tenant", watched)
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    for n in range(12):
        put(client, key, f"todo:t{n}", {"title": f"上海出差预算 第{n}项 报销 合同 付款", "status": "open",
                                        "notes": f"周报 审批 发票 差旅 住宿 机票 会议 客户 {n}"})
    long_query = "上海出差预算报销合同付款周报审批发票差旅住宿机票会议客户"
    assert len(parse_query(long_query).terms) >= OFFLOAD_FROM_TERMS
    answered = search(client, key, query=long_query)
    assert sent == ["search"], sent
    short = search(client, key, query="上海 预算")
    assert sent == ["search"], sent  # a short query stays in place
    assert short["items"], short
    monkeypatch.setattr(offload, "in_tenant", in_place)  # the same long search, in place
    placed = search(client, key, query=long_query)
    assert sent == ["search"], sent

    def shown(result: dict[str, Any]) -> list[tuple[str, str, str]]:
        return [(item["ref"], item["snippet"], item["state"]) for item in result["items"]]

    assert shown(answered) == shown(placed) and len(answered["items"]) == 10, answered


def _sleep(session: Session, seconds: float) -> str:
    session.execute(text("SELECT pg_sleep(:s)"), {"s": seconds})
    return str(session.execute(text("SHOW statement_timeout")).scalar_one())


def test_work_in_the_pool_is_bound_by_its_callers_statement_timeout(settings: Settings) -> None:
    """The pool's connection is made as the caller's engine (its statement timeout too): a long statement of a pooled
    search or window is cancelled there as it would be in place (the API's 503 statement_timeout)."""
    quick = make_engine(settings.require_database_url(), pool_size=1, statement_timeout_seconds=0.2)
    offload.start(1, 0)
    try:
        assert offload.in_tenant(quick, "t-any", _sleep, 0.0) == "200ms"
        with pytest.raises(OperationalError, match="statement timeout"):
            offload.in_tenant(quick, "t-any", _sleep, 2.0)
        with pytest.raises(OperationalError, match="statement timeout"):
            offload.in_tenant(quick, "t-any", _sleep, 2.0, inline=True)
    finally:
        offload.stop()
        quick.dispose()


def _store_in_pool(store: PostgresArtifactStore) -> tuple[str, str]:
    with store.engine.connect() as conn:
        return store.namespace, str(conn.execute(text("SHOW statement_timeout")).scalar_one())


def test_a_postgres_artifact_store_travels_to_the_pool_as_its_engine_is_made(
    pool: offload.CpuPool, settings: Settings
) -> None:
    """The residue scan takes the artifact store into the pool: there it is the same namespace, on an engine made
    as the caller's (statement timeout included)."""
    quick = make_engine(settings.require_database_url(), pool_size=1, statement_timeout_seconds=0.2)
    try:
        store = PostgresArtifactStore(quick).within("records/abc")
        assert pool.run(_store_in_pool, store) == ("records/abc", "200ms")
    finally:
        quick.dispose()


def test_a_caller_waiting_on_the_pool_is_beaten_for_meanwhile(pool: offload.CpuPool) -> None:
    """A step waiting for its charts must keep heartbeating: ``beat`` runs every BEAT_SECONDS until the answer."""
    beats: list[float] = []
    assert pool.run(_slow, 2.5, beat=lambda: beats.append(0.0)) == 2.5
    assert len(beats) >= 2
    assert pool.run(_slow, 0.0, beat=lambda: beats.append(1.0)) == 0.0 and 1.0 not in beats


def test_a_pool_whose_parent_is_killed_outright_ends_itself() -> None:
    """A worker killed with SIGKILL (a drill, the out-of-memory killer) left its pool processes running, orphaned,
    one pair per kill; now each notices its new parent and exits."""
    script = ("import sys, time; from memory.offload import CpuPool; "
              "print(*CpuPool(2, 0).warm(), flush=True); time.sleep(120)")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    try:
        assert parent.stdout is not None
        pool_pids = [int(pid) for pid in parent.stdout.readline().split()]
        assert pool_pids and all(pid_alive(pid) for pid in pool_pids)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 10 * offload.ORPHAN_CHECK_SECONDS
    while any(pid_alive(pid) for pid in pool_pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(pid_alive(pid) for pid in pool_pids)
