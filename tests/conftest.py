"""Session-scoped real services: an embedded PostgreSQL cluster and a Temporal dev server.

Nothing here is mocked. Each test isolates itself by creating its own tenants
(``make_key``), so the services are shared and started once per test process: under pytest-xdist
(``-n 2`` in pyproject.toml) each process has its own cluster and dev server, on free ports and in
its own temporary directory.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import Engine

from api.devstack.postgres import EmbeddedPostgres, PostgresInfo
from api.devstack.processes import free_port
from api.devstack.temporal import TemporalDevServer
from api.main import create_app
from api.settings import Settings
from memory.artifact_store.s3 import S3Location
from memory.db import make_engine, tenant_session
from memory.identity.auth import create_api_key
from memory.tasks import registry
from migrations import upgrade

# The suite keeps both cores busy by design (-n 2, beside PostgreSQL and Temporal). In the kernel's idle class,
# background work (the CPU pool's residue scans and charts, the worker's embedding engines, which also embed
# deletion's probes) got nearly no CPU, and a deletion's verification outlived its test's deadline (a CI failure,
# reproduced with three busy loops beside one test). Niced only, it keeps a share. Set for the whole process, as
# the memory layer reads it from the environment too (memory.embedders.configured_embedder); the idle class itself
# is covered by tests/test_offload.py and tests/recall/test_backlog_embedding.py, which ask for it explicitly.
os.environ["MNEMO_CPU_POOL_IDLE"] = "false"


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresInfo]:
    server = EmbeddedPostgres(tmp_path_factory.mktemp("postgres"), port=free_port())
    info = server.start()
    upgrade(info.url())
    yield info
    server.stop()


@pytest.fixture(scope="session")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TemporalDevServer]:
    server = TemporalDevServer(tmp_path_factory.mktemp("temporal"), port=free_port(), ui_port=None, namespace="mnemo")
    server.start()
    server.wait_ready()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def settings(postgres: PostgresInfo, temporal: TemporalDevServer, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return Settings(
        database_url=postgres.url(),
        temporal_address=temporal.address,
        temporal_namespace="mnemo",
        task_queue=f"mnemo-test-{uuid.uuid4().hex[:8]}",
        data_dir=Path(tmp_path_factory.mktemp("data")),
        # Verification rounds are charged in wall time, so a slow round on a loaded machine made the tenant's
        # next one wait ten times as long. Tests not about that budget get a burst none of them spends;
        # tests/deletion/test_rounds.py sets its own.
        residue_scan_burst_seconds=600.0,
    )


@pytest.fixture(scope="session")
def s3_standin() -> Iterator[S3Location]:
    """STAND-IN for the production object store (MinIO in docker-compose.yml), which cannot run here (no Docker,
    no binary downloads): moto's S3 server, a real HTTP server speaking the S3 protocol on a loopback port,
    with one empty bucket. The code under test talks to it over HTTP exactly as it talks to MinIO."""
    server, location = start_s3_standin(free_port())
    try:
        yield location
    finally:
        server.stop()


class S3Standin:
    """moto's S3 application served on a loopback port from a thread. Bound here, in the caller's thread, so that
    a port still taken is an error at once (moto's own ThreadedMotoServer binds in its thread and then waits for a
    ready event that never comes: a restart on the same port hung a CI run); :meth:`stop` closes the socket too,
    so the port can be bound again."""

    def __init__(self, port: int) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        deadline = time.monotonic() + 10
        while True:
            try:
                self.server = make_server("127.0.0.1", port, DomainDispatcherApplication(create_backend_app), True,
                                          request_handler=MotoRequestHandler)
                break
            except OSError:
                if time.monotonic() > deadline:  # still taken after 10 s: the test fails, it does not hang
                    raise
                time.sleep(0.1)
        self.thread = threading.Thread(target=self.server.serve_forever, name="s3-standin", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def start_s3_standin(port: int) -> tuple[S3Standin, S3Location]:
    """The stand-in of :func:`s3_standin` on ``port``, started, with its empty bucket: (server, location)."""
    server = S3Standin(port)
    location = S3Location(bucket="mnemo-artifacts", endpoint_url=f"http://127.0.0.1:{port}",
                          access_key="standin-access", secret_key="standin-secret", prefix="mnemo/")
    location.client().create_bucket(Bucket=location.bucket)
    return server, location


def s3_settings(settings: Settings, location: S3Location, **update: Any) -> Settings:
    """``settings`` pointed at the object store ``location`` (as MNEMO_ARTIFACT_S3_* would)."""
    return settings.model_copy(update={
        "artifact_store": "s3", "artifact_s3_endpoint_url": location.endpoint_url,
        "artifact_s3_bucket": location.bucket, "artifact_s3_access_key": location.access_key,
        "artifact_s3_secret_key": SecretStr(location.secret_key or ""), "artifact_s3_prefix": location.prefix,
        **update})


@pytest.fixture(scope="session")
def engine(settings: Settings) -> Iterator[Engine]:
    engine = make_engine(settings.require_database_url())
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


MakeKey = Callable[..., str]


@pytest.fixture(scope="session")
def make_key(engine: Engine) -> MakeKey:
    """Create an API key; by default in a brand-new tenant, so tests never see each other's data."""

    def make(
        tenant: str | None = None,
        user: str = "alice",
        roles: tuple[str, ...] = ("memory_writer",),
        agent: str | None = None,
    ) -> str:
        tenant_id = tenant or f"t-{uuid.uuid4().hex[:12]}"
        with tenant_session(engine, tenant_id) as session:
            return create_api_key(session, tenant_id=tenant_id, user_id=user, roles=list(roles), agent_id=agent)

    return make


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def poll(
    client: TestClient, key: str, url: str, predicate: Callable[[dict[str, Any]], bool], timeout: float
) -> dict[str, Any]:
    """GET ``url`` (bounded) until ``predicate`` holds on its JSON; fail with the last body otherwise."""
    deadline = time.monotonic() + timeout
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        response = client.get(url, headers=auth(key))
        assert response.status_code == 200, response.text
        body = response.json()
        if predicate(body):
            return body
        time.sleep(0.1)
    raise AssertionError(f"{url} never reached the expected state in {timeout}s; last: {body}")


@pytest.fixture(scope="module", autouse=True)
def task_types_of_the_module() -> Iterator[None]:
    """The task types and step functions a test module declares are its own: each module starts from mnemo's own
    (loaded first, so they are never forgotten) and its declarations go with it."""
    registry.load(())
    with registry.kept():
        yield
