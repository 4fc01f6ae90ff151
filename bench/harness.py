"""What every benchmark needs around its measurement: printing, percentiles, the services, keys and seed data.

One home, so that two benchmarks compare like with like: the same rank rule for a p95, the same stack
(:class:`api.devstack.stack.DevStack`, as ``mnemo dev`` starts it), the same way to a key.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from api.devstack.stack import DevStack


def say(message: str) -> None:
    """Print at once: progress lines of a long run must show while it runs, also through a pipe."""
    print(message, flush=True)


def percentile(values: Sequence[float], q: float) -> float:
    """The sorted value at rank ``round(q * (n - 1))``: the p50/p95/p99 of every benchmark (nan for no values)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def upper_percentile(values: Sequence[float], q: float) -> float:
    """The sorted value at rank ``int(q * n)``: bench/embedder_isolation.py's p95 since its first run (for 20
    batches, the slowest), kept so that its figures in docs/benchmarks.md stay comparable."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50, p95, p99, mean and count of a series of milliseconds, as the JSON reports hold them."""
    return {"p50": percentile(values, 0.5), "p95": percentile(values, 0.95), "p99": percentile(values, 0.99),
            "mean": statistics.fmean(values), "n": len(values)}


def libpq_url(sqlalchemy_url: str) -> str:
    """The libpq form (for psycopg) of a ``postgresql+psycopg://`` URL."""
    return sqlalchemy_url.replace("postgresql+psycopg://", "postgresql://")


def free_temporal_port() -> int:
    """A free port for Temporal whose UI port (+1000, as ``mnemo dev`` places it) is free too."""
    from api.devstack.processes import free_port, port_is_free

    port = free_port()
    while not (port_is_free(port) and port_is_free(port + 1000)):
        port = free_port()
    return port


@contextmanager
def dev_stack(prefix: str) -> Iterator[DevStack]:
    """The stack ``mnemo dev --no-demo`` runs (PostgreSQL, Temporal, worker, API) in a temp dir, removed after."""
    from api.devstack.processes import free_port
    from api.devstack.stack import DevOptions, DevStack

    data_dir = Path(tempfile.mkdtemp(prefix=prefix))
    stack = DevStack(DevOptions(data_dir=data_dir, port=free_port(), temporal_port=free_temporal_port(), demo=False))
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


@dataclass
class Services:
    api_url: str
    sqlalchemy_url: str
    temporal_address: str
    temporal_namespace: str
    stack: DevStack | None = None
    """The embedded stack this run started; None when it uses running services."""

    @property
    def conninfo(self) -> str:
        """libpq URL of the same database (the embedded stack's is a superuser's: bulk loads, bare paths)."""
        return libpq_url(self.sqlalchemy_url)


@contextmanager
def services(prefix: str) -> Iterator[Services]:
    """The running MNEMO_* services when ``MNEMO_DATABASE_URL`` is set (API at ``MNEMO_API_URL``, else
    ``http://MNEMO_API_HOST:MNEMO_API_PORT``), else :func:`dev_stack` in a temp dir named ``prefix…``."""
    from api.settings import Settings

    settings = Settings()
    if settings.database_url:
        yield Services(os.environ.get("MNEMO_API_URL", f"http://{settings.api_host}:{settings.api_port}"),
                       settings.database_url, settings.temporal_address, settings.temporal_namespace)
        return
    with dev_stack(prefix) as stack:
        assert stack.settings is not None and stack.settings.database_url is not None
        yield Services(stack.api_url, stack.settings.database_url, stack.temporal.address,
                       stack.settings.temporal_namespace, stack)


def make_key(sqlalchemy_url: str, tenant: str, user: str, roles: list[str]) -> str:
    """A new API key for ``user`` of ``tenant`` (the tenant is created with its first key)."""
    from memory.db import make_engine, tenant_session
    from memory.identity.auth import create_api_key

    engine = make_engine(sqlalchemy_url, pool_size=1)
    try:
        with tenant_session(engine, tenant) as session:
            return create_api_key(session, tenant_id=tenant, user_id=user, roles=roles)
    finally:
        engine.dispose()


def seed_sales_data(sqlalchemy_url: str, tenant: str, lines: int) -> None:
    """The sample sales lines a monthly report task reads, in ``tenant`` (after its first key)."""
    from memory.db import make_engine, tenant_session
    from memory.reports.sales import seed_sales

    engine = make_engine(sqlalchemy_url, pool_size=1)
    try:
        with tenant_session(engine, tenant) as session:
            seed_sales(session, tenant, total=lines)
    finally:
        engine.dispose()


def wait_for_vectors(conninfo: str, tenant: str, n: int, started: float, timeout: float) -> float:
    """Seconds from ``started`` (perf_counter) until all ``n`` current vectors of ``tenant`` are stored."""
    import psycopg

    from memory.embedders.engine import MODEL_NAME

    last = time.monotonic()
    with psycopg.connect(conninfo, autocommit=True) as conn:
        while True:
            done = conn.execute(
                "SELECT count(*) FROM memory_search s JOIN memories m USING (tenant_id, memory_id, version) "
                "WHERE s.tenant_id = %s AND s.embedding IS NOT NULL AND s.embedding_model = %s "
                "AND s.embedding_revision = m.revision",
                (tenant, MODEL_NAME),
            ).fetchone()[0]  # type: ignore[index]
            if done >= n:
                return time.perf_counter() - started
            if time.perf_counter() - started > timeout:
                raise SystemExit(f"only {done}/{n} vectors after {timeout:.0f}s")
            if time.monotonic() - last > 10:
                last = time.monotonic()
                say(f"    vectors: {done}/{n} stored, {time.perf_counter() - started:.0f}s since the start")
            time.sleep(0.2)


def embedding_schedule(svc: Services, action: Literal["pause", "unpause", "trigger"], note: str = "") -> None:
    """Pause, unpause or fire now the worker's embedding Schedule (the backlog sweep) of ``svc``."""
    from temporalio.client import Client

    from workflows.embedding import SCHEDULE_ID

    async def act() -> None:
        client = await Client.connect(svc.temporal_address, namespace=svc.temporal_namespace)
        handle = client.get_schedule_handle(SCHEDULE_ID)
        if action == "pause":
            await handle.pause(note=note)
        elif action == "unpause":
            await handle.unpause(note=note)
        else:
            await handle.trigger()

    asyncio.run(act())
