"""A starting worker waits for Temporal instead of exiting: CI once saw `mnemo dev` stop because the worker,
restarted while the Temporal dev server was itself restarting, exited with "connection refused"."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client

from api.devstack.processes import free_port
from api.devstack.temporal import TemporalDevServer
from api.settings import Settings
from api.worker import _start_up


def test_the_worker_start_up_waits_for_a_temporal_that_comes_up_late(settings: Settings, tmp_path: Path) -> None:
    port = free_port()
    late = settings.model_copy(update={"temporal_address": f"127.0.0.1:{port}"})
    server = TemporalDevServer(tmp_path / "temporal", port=port, ui_port=None, namespace="mnemo")

    async def scenario() -> Client:
        # Started from this thread's loop: a child dies with the thread that spawned it (PR_SET_PDEATHSIG).
        asyncio.get_running_loop().call_later(1.5, server.start)
        return await _start_up(late, asyncio.Event(), patience=60)

    try:
        client = asyncio.run(scenario())
        assert client.namespace == "mnemo"
        info = asyncio.run(client.workflow_service.get_system_info(GetSystemInfoRequest()))
        assert info.server_version  # the connection the worker would use answers
    finally:
        server.stop()


def test_the_worker_start_up_gives_up_after_its_patience(settings: Settings) -> None:
    nowhere = settings.model_copy(update={"temporal_address": f"127.0.0.1:{free_port()}"})
    with pytest.raises(RuntimeError):
        asyncio.run(_start_up(nowhere, asyncio.Event(), patience=1.0))
