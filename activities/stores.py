"""Publication destinations: where a report task's approved result is published (a side effect).

Directory-backed and idempotent by construction: publications are named by their idempotency key,
and every write is a rename of a finished directory, so a crash never leaves half a publication.
(The artifact store, the task's own outputs, is :class:`memory.tasks.artifacts.ArtifactStore`.)
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class Publication:
    publication_id: str
    location: str
    operation_id: str
    created: bool


class DestinationTimeout(Exception):
    """The destination did not answer in time: the publication may or may not exist."""


class DestinationUnavailable(Exception):
    """The destination could not be asked (e.g. for a lookup): nothing is known."""


class PublicationDestination(Protocol):
    name: str

    def put_if_absent(
        self, idempotency_key: str, operation_id: str, files: dict[str, bytes], metadata: dict[str, Any]
    ) -> Publication: ...

    def lookup(self, operation_id: str) -> Publication | None: ...

    def count(self, idempotency_key: str) -> int: ...


class DirectoryDestination:
    """Publications as directories named by their idempotency key, with an index by operation id."""

    def __init__(self, name: str, root: Path) -> None:
        self.name = name
        self.root = root

    def _key_dir(self, idempotency_key: str) -> Path:
        return self.root / "published" / hashlib.sha256(idempotency_key.encode()).hexdigest()[:40]

    def _op_index(self, operation_id: str) -> Path:
        return self.root / "by-operation" / operation_id

    def put_if_absent(
        self, idempotency_key: str, operation_id: str, files: dict[str, bytes], metadata: dict[str, Any]
    ) -> Publication:
        target = self._key_dir(idempotency_key)
        index = self._op_index(operation_id)
        index.parent.mkdir(parents=True, exist_ok=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        # The index is written first: a lookup by operation id trusts it only if the publication exists.
        index.write_text(target.name)
        if target.exists():
            return self._read(target, created=False)
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".staging-"))
        for name, content in files.items():
            (staging / name).write_bytes(content)
        meta = {**metadata, "idempotency_key": idempotency_key, "operation_id": operation_id}
        (staging / "publication.json").write_text(json.dumps(meta, sort_keys=True, indent=2))
        try:
            os.rename(staging, target)  # atomic; fails if another writer got there first
        except OSError:
            for child in staging.iterdir():
                child.unlink()
            staging.rmdir()
            return self._read(target, created=False)
        return self._read(target, created=True)

    def _read(self, target: Path, *, created: bool) -> Publication:
        meta = json.loads((target / "publication.json").read_text())
        return Publication(
            publication_id=target.name, location=str(target), operation_id=meta["operation_id"], created=created
        )

    def lookup(self, operation_id: str) -> Publication | None:
        """The publication this operation produced or found, or None when it definitely does not exist."""
        index = self._op_index(operation_id)
        if not index.exists():
            return None
        target = self.root / "published" / index.read_text().strip()
        return self._read(target, created=False) if target.exists() else None

    def count(self, idempotency_key: str) -> int:
        return int(self._key_dir(idempotency_key).exists())

    def all_publications(self) -> list[Path]:
        published = self.root / "published"
        return sorted(published.iterdir()) if published.exists() else []


class FaultyDestination:
    """Fault injection: a destination whose sends time out.

    ``timeouts_before_store`` sends per idempotency key time out before anything is stored (the
    request was lost); the next ``timeouts_after_store`` store, then time out (the response was
    lost). With ``lookups_unavailable`` every lookup fails too, so the outcome stays unknown.
    """

    def __init__(
        self,
        inner: DirectoryDestination,
        *,
        timeouts_after_store: int = 1,
        timeouts_before_store: int = 0,
        lookups_unavailable: bool = False,
    ) -> None:
        self.name = inner.name
        self.inner = inner
        self.timeouts_after_store = timeouts_after_store
        self.timeouts_before_store = timeouts_before_store
        self.lookups_unavailable = lookups_unavailable
        self._sent: Counter[str] = Counter()
        self._lock = threading.Lock()

    def put_if_absent(
        self, idempotency_key: str, operation_id: str, files: dict[str, bytes], metadata: dict[str, Any]
    ) -> Publication:
        with self._lock:
            self._sent[idempotency_key] += 1
            sent = self._sent[idempotency_key]
        if sent <= self.timeouts_before_store:
            raise DestinationTimeout(f"destination {self.name} timed out (before storing)")
        publication = self.inner.put_if_absent(idempotency_key, operation_id, files, metadata)
        lose_response = sent <= self.timeouts_before_store + self.timeouts_after_store
        if lose_response:
            raise DestinationTimeout(f"destination {self.name} timed out (after storing)")
        return publication

    def lookup(self, operation_id: str) -> Publication | None:
        if self.lookups_unavailable:
            raise DestinationUnavailable(f"destination {self.name} cannot be reached for lookups")
        return self.inner.lookup(operation_id)

    def count(self, idempotency_key: str) -> int:
        return self.inner.count(idempotency_key)


def default_destinations(data_dir: Path, fault: str | None = None) -> dict[str, PublicationDestination]:
    """``reports`` (a directory under the data dir); ``fault`` (MNEMO_PUBLISH_FAULT) adds fault-injecting ones.

    ``fault`` is a comma-separated list of ``timeout-after-store`` (adds ``reports-flaky``: the first
    send per report times out after storing), ``lost-request`` (adds ``reports-lossy``: the first send
    times out before storing) and ``unreachable`` (adds ``reports-unreachable``: sends time out after
    storing and lookups fail, so an operator must resolve the outcome).
    """
    root = data_dir / "publications"
    destinations: dict[str, PublicationDestination] = {"reports": DirectoryDestination("reports", root / "reports")}
    for item in filter(None, (part.strip() for part in (fault or "").split(","))):
        if item == "timeout-after-store":
            destinations["reports-flaky"] = FaultyDestination(
                DirectoryDestination("reports-flaky", root / "reports-flaky"), timeouts_after_store=1
            )
        elif item == "lost-request":
            destinations["reports-lossy"] = FaultyDestination(
                DirectoryDestination("reports-lossy", root / "reports-lossy"),
                timeouts_after_store=0,
                timeouts_before_store=1,
            )
        elif item == "unreachable":
            destinations["reports-unreachable"] = FaultyDestination(
                DirectoryDestination("reports-unreachable", root / "reports-unreachable"),
                timeouts_after_store=1_000_000,
                lookups_unavailable=True,
            )
        else:
            raise ValueError(f"unknown publish fault {item!r}; known: timeout-after-store, lost-request, unreachable")
    return destinations
