"""The catalog as a manifest with a content hash (``mnemo mcp manifest``), sessions that name the catalog they
were opened on (``stale_session`` once it is not the caller's any more), and the legacy adapter's switch and
counter."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid
from contextlib import ExitStack
from functools import cache
from pathlib import Path
from typing import Any

import httpx2
import pytest
from sqlalchemy import Engine

from api.devstack.processes import free_port
from api.main import create_app
from api.settings import Settings
from memory.db import global_session, tenant_session
from memory.errors import MnemoError
from memory.identity.auth import authenticate
from memory.resources.catalog import load_catalog
from memory.resources.runs import resolve_access
from tests.conftest import MakeKey, auth
from tests.mcp.conftest import data_of, error_of, mcp_session
from tests.workers import served

MNEMO = str(Path(sys.executable).parent / "mnemo")
LEGACY = {"search_memory", "get_transcript", "list_recordings", "list_todos"}


def _manifest(*args: str, **env: str) -> dict[str, Any]:
    """``mnemo mcp manifest`` once per arguments in this test process (a run costs seconds of imports)."""
    return _run_manifest(args, tuple(sorted(env.items())))


@cache
def _run_manifest(args: tuple[str, ...], env: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    return _manifest_run(*args, **dict(env))


def _manifest_run(*args: str, **env: str) -> dict[str, Any]:
    """A fresh ``mnemo mcp manifest`` process."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    done = subprocess.run([MNEMO, "mcp", "manifest", *args], capture_output=True, text=True, env={**base, **env},
                          timeout=60)
    assert done.returncode == 0, done.stderr
    manifest: dict[str, Any] = json.loads(done.stdout)
    return manifest


def test_the_manifest_hash_is_stable_and_changes_with_the_catalog(tmp_path: Path) -> None:
    first, again = _manifest(), _manifest_run()  # two processes: the hash does not depend on the run
    assert first == again and len(first["sha256"]) == 64
    assert {tool["name"] for tool in first["tools"]} == {"list", "search", "read", "browse_memory_categories",
                                                          "search_memories", "get_memory_detail", "claim_task_step",
                                                          "heartbeat_task_attempt", "complete_task_attempt",
                                                          "fail_task_attempt"}
    legacy = _manifest(MNEMO_MCP_LEGACY_TOOLS="true")
    public = _manifest("--audience", "public")
    assert {tool["name"] for tool in legacy["tools"]} == {tool["name"] for tool in first["tools"]} | LEGACY
    assert {tool["name"] for tool in public["tools"]} == {"list", "search", "read"}
    assert {entry["type"] for entry in public["resources"]} == {"episode", "calendar", "todo", "voice_memo", "contact"}
    note = json.loads((Path("memory/resources/builtin/contact.json")).read_text(encoding="utf-8"))
    (tmp_path / "note.json").write_text(json.dumps({**note, "type": "note"}), encoding="utf-8")
    declared = _manifest(MNEMO_RESOURCE_DECLARATIONS_DIR=str(tmp_path))
    assert "note" in {entry["type"] for entry in declared["resources"]}
    assert len({first["sha256"], legacy["sha256"], public["sha256"], declared["sha256"]}) == 4


async def test_a_session_names_its_catalog_and_lists_exactly_the_manifest(mcp_url: str, make_key: MakeKey) -> None:
    manifest = _manifest()
    sent: list[str | None] = []

    async def record(request: httpx2.Request) -> None:
        sent.append(request.headers.get("mcp-session-id"))

    async with mcp_session(mcp_url, make_key()) as (session, http):
        opened = await session.initialize()  # the result of the handshake, kept by the client
        http.event_hooks = {"request": [record], "response": []}
        listed = await session.list_tools()
    assert f"sha256:{manifest['sha256']}" in (opened.instructions or "")
    assert sent and all(sid is not None and sid.startswith(f"{manifest['sha256']}.") for sid in sent)
    assert [{"name": tool.name, "description": tool.description, "inputSchema": tool.input_schema,
             "outputSchema": tool.output_schema} for tool in sorted(listed.tools, key=lambda t: t.name)] \
        == manifest["tools"]


async def test_a_session_used_with_a_key_of_another_audience_is_stale(mcp_url: str, make_key: MakeKey) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    internal, public = make_key(tenant=tenant), make_key(tenant=tenant, roles=("public_client",))
    async with mcp_session(mcp_url, internal) as (session, http):
        assert data_of(await session.call_tool("list", {}))["audience"] == "internal"
        http.headers["Authorization"] = f"Bearer {public}"
        stale = error_of(await session.call_tool("list", {}))
    assert stale["code"] == "stale_session"
    assert stale["session_catalog"] == _manifest()["sha256"]
    assert stale["current_catalog"] == _manifest("--audience", "public")["sha256"]
    async with mcp_session(mcp_url, public) as (session, _):
        assert data_of(await session.call_tool("list", {}))["audience"] == "public"


async def test_after_a_restart_that_switches_the_legacy_tools_an_old_session_is_stale(
    settings: Settings, make_key: MakeKey
) -> None:
    key, port = make_key(), free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with_legacy = settings.model_copy(update={"mcp_legacy_tools": True})
    with ExitStack() as first_deploy:
        first_deploy.enter_context(served(create_app(with_legacy), port))
        async with mcp_session(url, key) as (session, _):
            assert {tool.name for tool in (await session.list_tools()).tools} >= LEGACY
            assert data_of(await session.call_tool("list", {}))["audience"] == "internal"
            first_deploy.close()
            with served(create_app(settings), port):  # the same address, deployed without the legacy tools
                stale = error_of(await session.call_tool("list", {}))
                async with mcp_session(url, key) as (fresh, _):
                    gone = error_of(await fresh.call_tool("list_todos", {}))
                    assert data_of(await fresh.call_tool("list", {}))["audience"] == "internal"
    assert stale["code"] == "stale_session"
    assert stale["session_catalog"] == _manifest(MNEMO_MCP_LEGACY_TOOLS="true")["sha256"]
    assert stale["current_catalog"] == _manifest()["sha256"]
    assert gone["code"] == "tool_not_available"


async def test_legacy_tools_are_counted_per_tenant_and_go_through_the_same_access(
    settings: Settings, make_key: MakeKey, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key, admin = make_key(tenant=tenant), make_key(tenant=tenant, roles=("admin",))
    run = {"X-Mnemo-Run": f"run-{uuid.uuid4().hex[:8]}"}
    with served(create_app(settings.model_copy(update={"mcp_legacy_tools": True}))) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        caplog.set_level(logging.INFO, logger="mnemo.mcp.legacy")
        async with mcp_session(url, key, run) as (session, _):
            refused = [error_of(await session.call_tool("list_todos", {"status": "open"})) for _ in range(2)]
            error_of(await session.call_tool("get_transcript", {"transcript_id": "t1"}))
        async with mcp_session(url, make_key(roles=("public_client",)), run) as (public, _):
            offered = {tool.name for tool in (await public.list_tools()).tools}
            error_of(await public.call_tool("list_recordings", {}))  # another tenant's call
        async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            usage = (await http.get("/mcp-legacy-usage", headers=auth(admin))).json()
            forbidden = await http.get("/mcp-legacy-usage", headers=auth(key))
    # The legacy call is refused exactly as any read with that run header: by resolve_access itself.
    with global_session(engine) as session:
        principal = authenticate(session, key)
    with tenant_session(engine, tenant) as session, pytest.raises(MnemoError) as direct:
        resolve_access(session, principal, load_catalog(), run_id=run["X-Mnemo-Run"], thread_id=None)
    assert {error["code"] for error in refused} == {direct.value.code}
    assert usage == {"enabled": True, "calls": {"search_memory": 0, "get_transcript": 1, "list_recordings": 0,
                                                "list_todos": 2}}
    assert forbidden.status_code == 403
    assert offered == {"list", "search", "read", "search_memory", "list_recordings", "list_todos"}
    logged = [r.getMessage() for r in caplog.records if r.name == "mnemo.mcp.legacy"]
    assert logged.count(f"legacy MCP tool called: tool=list_todos tenant={tenant}") == 2


async def test_with_the_switch_off_nothing_is_offered_or_counted(
    mcp_url: str, make_key: MakeKey
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key, admin = make_key(tenant=tenant), make_key(tenant=tenant, roles=("admin",))
    async with mcp_session(mcp_url, key) as (session, _):
        assert not LEGACY & {tool.name for tool in (await session.list_tools()).tools}
        assert error_of(await session.call_tool("list_todos", {}))["code"] == "tool_not_available"
    async with httpx2.AsyncClient(timeout=10) as http:
        usage = (await http.get(mcp_url.removesuffix("/mcp") + "/mcp-legacy-usage", headers=auth(admin))).json()
    assert usage == {"enabled": False, "calls": dict.fromkeys(sorted(LEGACY), 0)}
