"""Publication destinations: where a report task's approved result is published (a side effect).

Idempotent by construction: publications are named by their idempotency key, and each is recorded in one
transaction after its files are stored, so a crash never leaves half a publication. The files are in the
shared artifact store (:class:`memory.artifact_store.ArtifactStore`, beside the tasks' own outputs), so every
API replica and worker can read a published report, whichever process published it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx
from sqlalchemy import Engine, text
from temporalio.exceptions import ApplicationError

from activities.pinned import DELIVERY_TIMEOUT_SECONDS, send_pinned
from memory.artifact_store import ArtifactStore, read, sha256_hex
from memory.egress import AllowList, HostUnresolvable, Target, checked_target
from memory.errors import MnemoError
from memory.tasks import reminders
from memory.tasks.destinations import ARCHIVE_NAMESPACE

NAMESPACE = ARCHIVE_NAMESPACE


@dataclass(frozen=True)
class Publication:
    publication_id: str
    location: str | None
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


@dataclass(frozen=True)
class Published:
    """A stored publication: its files (name -> sha256 in the artifact store) and the metadata it was sent with."""

    publication_id: str
    operation_id: str
    files: dict[str, str]
    metadata: dict[str, Any]


class StoredDestination:
    """Publications in the shared artifact store (their files, ``publications`` namespace) and PostgreSQL (which
    idempotency key holds which files, and which operation produced or found each), so every API replica and
    worker reads the same publications. A publication is created whole or not at all: its files are stored
    first (idempotent by name), then one transaction records the publication and the operation's index."""

    def __init__(self, name: str, engine: Engine, artifacts: ArtifactStore) -> None:
        self.name = name
        self.engine = engine
        self.files = artifacts.within(NAMESPACE)

    @staticmethod
    def _key_hash(idempotency_key: str) -> str:
        return hashlib.sha256(idempotency_key.encode()).hexdigest()[:40]

    def _publication(self, key_hash: str, operation_id: str, *, created: bool) -> Publication:
        return Publication(publication_id=key_hash, location=f"{NAMESPACE}/{self.name}/{key_hash}",
                           operation_id=operation_id, created=created)

    def put_if_absent(
        self, idempotency_key: str, operation_id: str, files: dict[str, bytes], metadata: dict[str, Any]
    ) -> Publication:
        key_hash = self._key_hash(idempotency_key)
        names = {name: self.files.put(content) for name, content in files.items()}
        meta = {**metadata, "idempotency_key": idempotency_key, "operation_id": operation_id}
        row = {"d": self.name, "k": key_hash, "op": operation_id}
        with self.engine.begin() as conn:
            conn.execute(text("INSERT INTO publication_operations (destination, operation_id, key_hash) "
                              "VALUES (:d, :op, :k) ON CONFLICT (destination, operation_id) "
                              "DO UPDATE SET key_hash = EXCLUDED.key_hash"), row)
            # A concurrent send of the same key waits here on the key, then finds the first one's publication.
            created = conn.execute(text(
                "INSERT INTO publications (destination, key_hash, operation_id, files, metadata) VALUES "
                "(:d, :k, :op, CAST(:files AS jsonb), CAST(:meta AS jsonb)) ON CONFLICT DO NOTHING RETURNING 1"),
                {**row, "files": json.dumps(names), "meta": json.dumps(meta, sort_keys=True)}).first() is not None
            first = conn.execute(text("SELECT operation_id FROM publications WHERE destination = :d AND "
                                      "key_hash = :k"), row).scalar_one()
        return self._publication(key_hash, str(first), created=created)

    def lookup(self, operation_id: str) -> Publication | None:
        """The publication this operation produced or found, or None when it definitely does not exist."""
        with self.engine.connect() as conn:
            found = conn.execute(text(
                "SELECT p.key_hash, p.operation_id FROM publication_operations o JOIN publications p "
                "ON p.destination = o.destination AND p.key_hash = o.key_hash "
                "WHERE o.destination = :d AND o.operation_id = :op"), {"d": self.name, "op": operation_id}).first()
        return None if found is None else self._publication(str(found[0]), str(found[1]), created=False)

    def count(self, idempotency_key: str) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM publications WHERE destination = :d AND key_hash = :k"),
                                    {"d": self.name, "k": self._key_hash(idempotency_key)}).scalar_one())

    def all_publications(self) -> list[Published]:
        with self.engine.connect() as conn:
            rows = conn.execute(text("SELECT key_hash, operation_id, files, metadata FROM publications "
                                     "WHERE destination = :d ORDER BY key_hash"), {"d": self.name}).all()
        return [Published(str(key), str(op), dict(files), dict(meta)) for key, op, files, meta in rows]

    def read(self, publication: Published, name: str) -> bytes:
        """One file of a publication (a report is a few hundred kilobytes: whole)."""
        return read(self.files, publication.files[name])

    def import_directory(self, folder: Path) -> int:
        """Move the publications a directory destination (mnemo before issue 24) kept in ``folder`` in: each
        ``published/<key hash>/`` (its files and ``publication.json``) under its own idempotency key and
        operation, then the ``by-operation/`` index, so reconciling an operation still finds its publication
        (and never publishes twice). What was imported leaves the disk; how many publications were."""
        moved = 0
        published = folder / "published"
        for directory in sorted(published.iterdir()) if published.is_dir() else []:
            meta_file = directory / "publication.json"
            if directory.name.startswith(".") or not meta_file.is_file():
                continue  # a staging directory: a publication that was never made
            meta = json.loads(meta_file.read_text())
            key, operation = str(meta.pop("idempotency_key")), str(meta.pop("operation_id"))
            files = {path.name: path.read_bytes() for path in sorted(directory.iterdir())
                     if path.is_file() and path != meta_file}
            self.put_if_absent(key, operation, files, meta)
            shutil.rmtree(directory)
            moved += 1
        if published.is_dir() and not any(published.iterdir()):
            published.rmdir()
        index = folder / "by-operation"
        with self.engine.begin() as conn:
            for entry in sorted(index.iterdir()) if index.is_dir() else []:
                conn.execute(text("INSERT INTO publication_operations (destination, operation_id, key_hash) "
                                  "SELECT :d, :op, key_hash FROM publications WHERE destination = :d AND "
                                  "key_hash = :k ON CONFLICT DO NOTHING"),
                             {"d": self.name, "op": entry.name, "k": entry.read_text().strip()})
        if index.is_dir():
            shutil.rmtree(index)
        return moved


class FaultyDestination:
    """Fault injection: a destination whose sends time out.

    ``timeouts_before_store`` sends per idempotency key time out before anything is stored (the
    request was lost); the next ``timeouts_after_store`` store, then time out (the response was
    lost). With ``lookups_unavailable`` every lookup fails too, so the outcome stays unknown.
    """

    def __init__(
        self,
        inner: StoredDestination,
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


def default_destinations(engine: Engine, artifacts: ArtifactStore,
                         fault: str | None = None) -> dict[str, PublicationDestination]:
    """``archive`` and ``reports`` (in the artifact store); ``fault`` (MNEMO_PUBLISH_FAULT) adds fault-injecting ones.

    ``fault`` is a comma-separated list of ``timeout-after-store`` (adds ``reports-flaky``: the first
    send per report times out after storing), ``lost-request`` (adds ``reports-lossy``: the first send
    times out before storing) and ``unreachable`` (adds ``reports-unreachable``: sends time out after
    storing and lookups fail, so an operator must resolve the outcome).
    """
    def stored(name: str) -> StoredDestination:
        return StoredDestination(name, engine, artifacts)

    destinations: dict[str, PublicationDestination] = {"archive": stored("archive"), "reports": stored("reports")}
    for item in filter(None, (part.strip() for part in (fault or "").split(","))):
        if item == "timeout-after-store":
            destinations["reports-flaky"] = FaultyDestination(
                stored("reports-flaky"), timeouts_after_store=1
            )
        elif item == "lost-request":
            destinations["reports-lossy"] = FaultyDestination(
                stored("reports-lossy"),
                timeouts_after_store=0,
                timeouts_before_store=1,
            )
        elif item == "unreachable":
            destinations["reports-unreachable"] = FaultyDestination(
                stored("reports-unreachable"),
                timeouts_after_store=1_000_000,
                lookups_unavailable=True,
            )
        else:
            raise ValueError(f"unknown publish fault {item!r}; known: timeout-after-store, lost-request, unreachable")
    return destinations


OPERATION_HEADER = "X-Mnemo-Operation-Id"
PUBLICATION_EVENT = "publication"


class WebhookDestination:
    """A tenant's receiver: each send is one signed POST of the files (JSON, base64) to ``url``; a lookup is a
    signed ``GET {url}/operations/{operation_id}``. Both go to the address the guard checks right before the
    request. A timeout or a 408/429/5xx after the request went out is an unknown outcome (the receiver may have
    stored it): :class:`DestinationTimeout`, reconciled by lookup, never resent blindly."""

    timeout_seconds = DELIVERY_TIMEOUT_SECONDS

    def __init__(self, name: str, url: str, secret: str, allowed: AllowList) -> None:
        self.name, self.url, self.secret, self.allowed = name, url, secret, allowed

    def _target(self, url: str) -> Target:
        """The url judged again now: a name that no longer resolves is unavailable (retried), a non-public
        address is refused for good with the guard's code."""
        try:
            return checked_target(url, self.allowed)
        except HostUnresolvable as exc:
            raise DestinationUnavailable(exc.message) from None
        except MnemoError as exc:
            raise ApplicationError(exc.message, exc.details, type=exc.code, non_retryable=True) from None

    def _headers(self, body: bytes, operation_id: str) -> dict[str, str]:
        timestamp = int(time.time())
        return {"Content-Type": "application/json", reminders.EVENT_HEADER: PUBLICATION_EVENT,
                OPERATION_HEADER: operation_id, reminders.TIMESTAMP_HEADER: str(timestamp),
                reminders.SIGNATURE_HEADER: reminders.signature(self.secret, timestamp, body)}

    def put_if_absent(
        self, idempotency_key: str, operation_id: str, files: dict[str, bytes], metadata: dict[str, Any]
    ) -> Publication:
        body = json.dumps({
            **metadata, "type": PUBLICATION_EVENT, "operation_id": operation_id, "idempotency_key": idempotency_key,
            "files": [{"name": name, "sha256": sha256_hex(content), "size": len(content),
                       "content_base64": base64.b64encode(content).decode()} for name, content in files.items()],
        }, sort_keys=True, separators=(",", ":")).encode()
        headers = {**self._headers(body, operation_id), reminders.IDEMPOTENCY_HEADER: idempotency_key}
        target = self._target(self.url)
        try:
            response = send_pinned(target, "POST", body, headers, self.timeout_seconds)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise DestinationUnavailable(f"{self.name} could not be reached: {type(exc).__name__}") from None
        except httpx.HTTPError as exc:  # sent, no answer: it may have been stored
            raise DestinationTimeout(f"destination {self.name} did not answer: {type(exc).__name__}") from None
        if response.status_code in (408, 429) or response.status_code >= 500:
            raise DestinationTimeout(f"destination {self.name} answered {response.status_code}")
        if not response.is_success:
            raise ApplicationError(f"destination {self.name} refused the publication with {response.status_code}",
                                   type="destination_refused", non_retryable=True)
        return self._publication(response, operation_id, created=True)

    def lookup(self, operation_id: str) -> Publication | None:
        target = self._target(f"{self.url.rstrip('/')}/operations/{operation_id}")
        try:
            response = send_pinned(target, "GET", b"", self._headers(b"", operation_id), self.timeout_seconds)
        except httpx.HTTPError as exc:
            raise DestinationUnavailable(f"destination {self.name}'s lookup failed: {type(exc).__name__}") from None
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise DestinationUnavailable(f"destination {self.name}'s lookup answered {response.status_code}")
        return self._publication(response, operation_id, created=False)

    def _publication(self, response: httpx.Response, operation_id: str, *, created: bool) -> Publication:
        """The receiver's ``{"publication_id", "url"?}``; a body without an id names the publication by operation."""
        try:
            answer = response.json()
        except ValueError:
            answer = {}
        answer = answer if isinstance(answer, dict) else {}
        location = answer.get("url")
        return Publication(str(answer.get("publication_id") or operation_id),
                           location if isinstance(location, str) else None, operation_id, created)
