"""The vector backlog's throughput and its share of the cores (issue 28, item 2).

The worker embeds with one single-threaded engine per core, each taking part of a batch, in the kernel's idle
class (a recall's query embedding, API and database work preempt them); one activity embeds several batches,
writing each while the next one embeds. The figures are ``bench/embedding_backfill.py``'s; these tests check
the behaviour.
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Sequence

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from activities.embedding import EmbedBatchInput, EmbeddingActivities
from memory.db import tenant_session
from memory.embedders import configured_embedder
from memory.embedders.backlog import BacklogEmbedder, shares
from memory.embedders.engine import MODEL_NAME, default_embedder
from memory.models import MemorySearch
from memory.priority import IDLE_CLASS, scheduling_class
from tests.conftest import MakeKey
from tests.recall.conftest import write


def test_a_batch_is_shared_in_order_by_length() -> None:
    assert [len(run) for run in shares(["x" * 10] * 64, 2)] == [32, 32]
    assert [len(run) for run in shares(["b", "c", "a" * 100], 2)] == [2, 1]  # the long text alone
    assert shares(["only"], 2) == [["only"]] and shares([], 2) == []
    texts = [str(i) * (i % 7 + 1) for i in range(50)]
    assert [t for run in shares(texts, 3) for t in run] == texts


def test_the_backlog_engines_yield_the_cpu_and_embed_as_one_engine_does() -> None:
    """Idle class and raised niceness for the backlog's engines, not for the query engine a recall uses."""
    backlog = BacklogEmbedder(engines=2)
    query_engine = default_embedder()
    try:
        texts = [f"记忆 number {i}: {'a longer memory text ' * (i % 5)}" for i in range(12)]
        for got, want in zip(backlog.embed(texts), query_engine.embed(texts), strict=True):
            assert math.isclose(sum(a * b for a, b in zip(got, want, strict=True)), 1.0, rel_tol=1e-5)
        pids = [engine.pid for engine in backlog.engines]
        assert len({*pids}) == 2 and None not in pids
        own = os.getpriority(os.PRIO_PROCESS, 0)
        for pid in pids:
            assert pid is not None
            assert scheduling_class(pid) == IDLE_CLASS and os.getpriority(os.PRIO_PROCESS, pid) >= own + 10
        assert query_engine.pid is not None and scheduling_class(query_engine.pid) != IDLE_CLASS
    finally:
        backlog.close()


def test_with_the_idle_class_turned_off_the_worker_engines_are_niced_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """MNEMO_CPU_POOL_IDLE=false reaches the worker's engines as it reaches the CPU pool: niced, in the normal class
    (on an always-busy machine the idle class starved deletion's probe embeddings)."""
    monkeypatch.setenv("MNEMO_CPU_POOL_IDLE", "false")
    embedder = configured_embedder.__wrapped__()  # a new one, read from the environment now, not the cached one
    try:
        assert isinstance(embedder, BacklogEmbedder)
        assert len(embedder.embed_query("一个探针 a probe")) == embedder.dimensions
        pid = embedder.engines[0].pid
        assert pid is not None
        assert scheduling_class(pid) == os.SCHED_OTHER
        assert os.getpriority(os.PRIO_PROCESS, pid) >= os.getpriority(os.PRIO_PROCESS, 0) + 10
    finally:
        embedder.close()


class Counting:
    """The real worker embedder, counting the texts of each call it is given."""

    def __init__(self, inner: BacklogEmbedder) -> None:
        self.inner, self.calls = inner, list[int]()
        self.name, self.dimensions = inner.name, inner.dimensions

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        return self.inner.embed(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)

    def close(self) -> None:
        self.inner.close()


def test_one_activity_embeds_several_batches_and_stores_them_all(
    client: TestClient, make_key: MakeKey, engine: Engine
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    key = make_key(tenant=tenant)
    ids = {write(client, key, f"backlog memory {i} about the Hermes release") for i in range(10)}
    embedder = Counting(BacklogEmbedder(engines=2))
    try:
        result = EmbeddingActivities(engine, embedder).embed_batch(EmbedBatchInput(tenant, batch_size=4, batches=3))
    finally:
        embedder.close()
    assert (result.pending, result.written, result.refused) == (10, 10, 0)
    assert embedder.calls == [4, 4, 2]  # batches of the asked size, one activity
    with tenant_session(engine, tenant) as session:
        rows = session.execute(select(MemorySearch).where(MemorySearch.tenant_id == tenant)).scalars().all()
    assert {str(r.memory_id) for r in rows} == ids
    assert all(r.embedding is not None and r.embedding_model == MODEL_NAME for r in rows)
