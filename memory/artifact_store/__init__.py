"""The artifact store: bytes every API replica and worker can read, named by their SHA-256.

Task artifacts (drafts, charts), record bodies (:mod:`memory.resources.bodies`) and published reports
(:mod:`activities.stores`) live here rather than on one process's disk, so a second API replica serves what a
worker wrote. :class:`ArtifactStore` is the interface; :mod:`memory.artifact_store.postgres` (the embedded
default: the bytes are in the database, and so in its backups) and :mod:`memory.artifact_store.s3` (an
S3-compatible object store, for production) implement it, chosen by ``MNEMO_ARTIFACT_STORE``.

Content-addressed, so a put is idempotent and needs no transaction with the rows naming the bytes; each write
is atomic (a reader never sees half of one). Reads stream: :meth:`ArtifactStore.open` yields chunks and
checks the digest as they pass, so nothing needs the whole artifact in memory.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from memory.errors import MnemoError

CHUNK_BYTES = 1 << 20
"""How much one read yields (and one PostgreSQL row holds): a download never holds more than this at a time."""

_SHA256 = re.compile("[0-9a-f]{64}")


class ArtifactUnavailable(MnemoError):
    """Bytes a row names that the store does not have, or has corrupted: never served partly as if whole."""

    code = "artifact_unavailable"
    http_status = 500


class ArtifactStoreUnavailable(MnemoError):
    """The store could not be asked (the object store is down or refuses the credentials): nothing is known."""

    code = "artifact_store_unavailable"
    http_status = 503


@dataclass(frozen=True)
class Stored:
    """One artifact a listing found: its name, size, and when it was written (the store's clock)."""

    sha256: str
    size_bytes: int
    written_at: datetime


class ArtifactStore(Protocol):
    """Content-addressed bytes in one namespace (``tasks``, ``records/<tenant>``, ...)."""

    namespace: str

    def within(self, namespace: str) -> ArtifactStore:
        """The same store, in a namespace below this one (listings never mix namespaces)."""
        ...

    def put(self, content: bytes) -> str:
        """Store ``content`` (once, however often it is put); its sha256."""
        ...

    def open(self, sha256: str) -> Iterator[bytes]:
        """The bytes in chunks, checked against their name as they pass. :class:`ArtifactUnavailable` at once
        when the store does not have them, or at the end when they do not match."""
        ...

    def exists(self, sha256: str) -> bool: ...

    def delete(self, sha256: str) -> bool:
        """Remove the bytes; whether they were there."""
        ...

    def list(self) -> Iterator[Stored]:
        """Every artifact of this namespace (not of the namespaces below it), in sha256 order."""
        ...


def sha256_hex(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def check_digest(sha256: str) -> str:
    """``sha256`` if it is a lowercase hex SHA-256 digest: anything else names no artifact."""
    if not _SHA256.fullmatch(sha256):
        raise ValueError(f"not a sha256 hex digest: {sha256!r}")
    return sha256


def join(namespace: str, below: str) -> str:
    """A namespace below another; each part is a path-safe name (the object store's keys are built of them)."""
    if not re.fullmatch(r"[a-z0-9_-]+(/[a-z0-9_-]+)*", below):
        raise ValueError(f"not an artifact namespace: {below!r} (lowercase letters, digits, '_', '-', '/')")
    return f"{namespace}/{below}" if namespace else below


def verified(sha256: str, chunks: Iterable[bytes], where: str) -> Iterator[bytes]:
    """Pass ``chunks`` on, and fail if together they are not the bytes named ``sha256``: before the last chunk,
    which is held back until the digest checks out, so corrupted bytes are never passed on whole (a download
    ends short of its Content-Length; an artifact of one chunk sends no byte)."""
    digest = hashlib.sha256()
    held: bytes | None = None
    for chunk in chunks:
        digest.update(chunk)
        if held is not None:
            yield held
        held = chunk
    if digest.hexdigest() != sha256:
        raise ArtifactUnavailable(f"artifact {sha256} is corrupted in {where}: its bytes have another sha256",
                                  details={"sha256": sha256})
    if held is not None:
        yield held


def read(store: ArtifactStore, sha256: str) -> bytes:
    """The whole artifact (for small ones: a record body to decode, a chart to embed); checked."""
    return b"".join(store.open(sha256))


def missing(sha256: str, where: str) -> ArtifactUnavailable:
    return ArtifactUnavailable(
        f"artifact {sha256} is not in {where}; if this installation kept artifacts in its data directory before, "
        "run `mnemo import-artifacts <that data dir>` (README, 'Artifact store')", details={"sha256": sha256})


__all__ = ["CHUNK_BYTES", "ArtifactStore", "ArtifactStoreUnavailable", "ArtifactUnavailable", "Stored",
           "check_digest", "join", "missing", "read", "sha256_hex", "verified"]
