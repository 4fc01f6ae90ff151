"""Admission control: one tenant's expensive requests never take every slot of a process.

Issue 12, finding 8: four 2,000-character CJK recalls of one tenant (5-9 s each, mostly the query
embedding) held the API's one embedding thread and the database pool, and another tenant's plain
recall waited up to 20 s. Recalls of a tenant beyond ``MNEMO_TENANT_RECALL_CONCURRENCY`` in flight
in this process are refused at once with a 429 ``tenant_busy`` and ``Retry-After`` instead of
queueing behind each other; the query embedding reads at most
:data:`memory.embeddings.QUERY_MAX_CHARS`, and every API statement has a timeout
(``MNEMO_STATEMENT_TIMEOUT_SECONDS``, a 503 ``statement_timeout``).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from memory.errors import MnemoError

RETRY_AFTER_SECONDS = 1


class TenantBusy(MnemoError):
    code = "tenant_busy"
    http_status = 429


class TenantLimiter:
    """At most ``limit`` requests of one tenant at a time in this process; the rest are refused, not queued."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._in_flight: Counter[str] = Counter()

    @contextmanager
    def slot(self, tenant_id: str) -> Iterator[None]:
        with self._lock:
            if self._in_flight[tenant_id] >= self.limit:
                raise TenantBusy(
                    f"your tenant already has {self.limit} recalls in progress on this server; "
                    f"retry in {RETRY_AFTER_SECONDS} s",
                    details={"retry_after_seconds": RETRY_AFTER_SECONDS, "limit": self.limit},
                )
            self._in_flight[tenant_id] += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight[tenant_id] -= 1
                if not self._in_flight[tenant_id]:
                    del self._in_flight[tenant_id]
