"""Admission control: one tenant's expensive requests never take every slot of a process.

Issue 12, finding 8: four 2,000-character CJK recalls of one tenant (5-9 s each, mostly the query
embedding) held the API's one embedding thread and the database pool, and another tenant's plain
recall waited up to 20 s. Recalls of a tenant beyond ``MNEMO_TENANT_RECALL_CONCURRENCY`` in flight
in this process are refused at once with a 429 ``tenant_busy`` and ``Retry-After`` instead of
queueing behind each other (issue 23 made this every expensive route's rule: :mod:`api.admission`);
the query embedding reads at most :data:`memory.embedders.engine.QUERY_MAX_CHARS`, and every API statement has a timeout
(``MNEMO_STATEMENT_TIMEOUT_SECONDS``, a 503 ``statement_timeout``). Query embeddings take turns by
tenant on the app's :class:`EmbeddingLanes`.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, TypeVar

from memory.embedders import ModelSettings, TextEmbedder, make_embedder, model_of
from memory.embedders.engine import Embedder
from memory.errors import MnemoError

RETRY_AFTER_SECONDS = 1
T = TypeVar("T")


class TenantBusy(MnemoError):
    code = "tenant_busy"
    http_status = 429


class TenantLimiter:
    """At most ``limit`` requests of one tenant at a time in this process; the rest are refused, not queued."""

    def __init__(self, limit: int, what: str = "recalls") -> None:
        self.limit = limit
        self.what = what
        self._lock = threading.Lock()
        self._in_flight: Counter[str] = Counter()

    @contextmanager
    def slot(self, tenant_id: str, weight: int = 1) -> Iterator[None]:
        """Hold ``weight`` of the tenant's ``limit`` slots (a heavier request takes more; at most all of them)."""
        weight = max(1, min(weight, self.limit))
        with self._lock:
            if self._in_flight[tenant_id] + weight > self.limit:
                raise TenantBusy(
                    f"your tenant already has {self.limit} {self.what} in progress on this server; "
                    f"retry in {RETRY_AFTER_SECONDS} s",
                    details={"retry_after_seconds": RETRY_AFTER_SECONDS, "limit": self.limit},
                )
            self._in_flight[tenant_id] += weight
        try:
            yield
        finally:
            with self._lock:
                self._in_flight[tenant_id] -= weight
                if not self._in_flight[tenant_id]:
                    del self._in_flight[tenant_id]


class FairQueue:
    """Worker threads (lanes) that serve tenants in turn, one job of a tenant at a time.

    The query embedding engine runs one text at a time. Behind a FIFO queue (a one-thread
    executor, as before), a tenant with four 2,000-character recalls in flight put four long
    embeddings (~0.9 s each on 2 shared cores for the 256 characters the engine reads) in front of
    every other tenant's short one; ``bench/load.py`` measured another tenant's recall p95 at tens
    of times its idle p95. Here each tenant has its own queue, a free lane takes the oldest job of
    the next tenant in round-robin order, and a tenant never has more than one job running: with
    two lanes (two engine children), one tenant's backlog holds one lane at most and every other
    tenant's job starts on the other at once, whatever the backlog. A job is called with its lane's
    index first, so that each lane can use its own engine.
    """

    def __init__(self, name: str = "mnemo-embed", lanes: int = 1) -> None:
        self._lock = threading.Condition()
        self._queues: dict[str, deque[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]]] = {}
        self._turns: deque[str] = deque()  # tenants with work, in the order they are served
        self._running: set[str] = set()
        self._closed = False
        self.threads = [
            threading.Thread(target=self._serve, args=(lane,), name=f"{name}-{lane}", daemon=True)
            for lane in range(lanes)
        ]
        for thread in self.threads:
            thread.start()

    def submit(self, tenant_id: str, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Run ``fn(lane, *args)`` in the tenant's turn."""
        future: Future[T] = Future()
        with self._lock:
            if tenant_id not in self._queues:
                self._queues[tenant_id] = deque()
                self._turns.append(tenant_id)
            self._queues[tenant_id].append((future, fn, args))
            self._lock.notify_all()
        return future

    def close(self) -> None:
        """Cancel the jobs still queued and stop the lanes once their running jobs are done."""
        with self._lock:
            self._closed = True
            for queue in self._queues.values():
                for future, _fn, _args in queue:
                    future.cancel()
            self._queues.clear()
            self._turns.clear()
            self._lock.notify_all()
        for thread in self.threads:
            thread.join()

    def _next(self) -> tuple[str, Future[Any], Callable[..., Any], tuple[Any, ...]] | None:
        """The next job in turn, waiting for one; None once the queue is closed."""
        with self._lock:
            while True:
                if self._closed:
                    return None
                tenant_id = next((t for t in self._turns if t not in self._running), None)
                if tenant_id is not None:
                    break
                self._lock.wait()
            self._turns.remove(tenant_id)
            queue = self._queues[tenant_id]
            future, fn, args = queue.popleft()
            if queue:
                self._turns.append(tenant_id)  # its next job waits for every other tenant's turn
            else:
                del self._queues[tenant_id]
            self._running.add(tenant_id)
            return tenant_id, future, fn, args

    def _serve(self, lane: int) -> None:
        while (job := self._next()) is not None:
            tenant_id, future, fn, args = job
            try:
                if future.set_running_or_notify_cancel():  # else cancelled while queued: its request failed first
                    try:
                        future.set_result(fn(lane, *args))
                    except BaseException as exc:  # handed to the waiting request
                        future.set_exception(exc)
            finally:
                with self._lock:
                    self._running.discard(tenant_id)
                    self._lock.notify_all()


class EmbeddingLanes:
    """The query embeddings of one app: a :class:`FairQueue` whose every lane has an embedder of its own.

    Built from the app's settings (``query_embedding_engines`` lanes, the ``MNEMO_EMBEDDINGS_*`` model) when
    the app starts and closed with it: the lanes stop and their engine children exit. A lane starts its
    embedder (for the bundled model, an engine child) on its first job, and only that lane's thread uses it.
    """

    def __init__(self, lanes: int, models: ModelSettings | None = None) -> None:
        self._models = models or ModelSettings()
        self.model, self.dimensions = model_of(self._models)
        self._engines: dict[int, TextEmbedder] = {}
        self.queue = FairQueue("mnemo-embed", lanes=lanes)

    def submit(self, tenant_id: str, text: str) -> Future[list[float]]:
        """The query vector of ``text``, computed in the tenant's turn."""
        return self.queue.submit(tenant_id, self._embed, text)

    def _embed(self, lane: int, text: str) -> list[float]:
        if lane not in self._engines:
            self._engines[lane] = make_embedder(self._models)
        return self._engines[lane].embed_query(text)

    @property
    def engine_pids(self) -> list[int]:
        """The running engine children (for tests and drills)."""
        return [pid for engine in self._engines.values()
                if isinstance(engine, Embedder) and (pid := engine.pid) is not None]

    def close(self) -> None:
        self.queue.close()
        for engine in self._engines.values():
            engine.close()
        self._engines.clear()
