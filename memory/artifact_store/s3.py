"""The production artifact store: an S3-compatible object store (MinIO in docker-compose.yml, or AWS S3).

An object per artifact, keyed ``<prefix><namespace>/<sha[:2]>/<sha256>``; a put of a single object is atomic
in S3, so a reader never sees half of one. Reads stream the object's body in :data:`CHUNK_BYTES` chunks. The
bucket is the operator's to create and to back up (README, "Artifact store").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from memory.artifact_store import (
    CHUNK_BYTES,
    ArtifactStore,
    ArtifactStoreUnavailable,
    Stored,
    check_digest,
    join,
    missing,
    sha256_hex,
    verified,
)

T = TypeVar("T")
RETRY_AFTER_SECONDS = 5
"""What an API answer for an unreachable store asks the client to wait (the ``Retry-After`` of its 503)."""
_ABSENT = {"404", "NoSuchKey", "NotFound"}


@dataclass(frozen=True)
class S3Location:
    """Where the objects are and how to reach them (the ``MNEMO_ARTIFACT_S3_*`` settings)."""

    bucket: str
    endpoint_url: str | None = None
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)  # never in a log line or a traceback
    region: str = "us-east-1"
    prefix: str = ""

    def client(self) -> Any:
        """A boto3 S3 client; path-style addressing, which MinIO and every S3-compatible store accept."""
        return boto3.client(
            "s3", endpoint_url=self.endpoint_url, aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key, region_name=self.region,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3, "mode": "standard"},
                          connect_timeout=5, read_timeout=30),
        )


def _absent(exc: ClientError) -> bool:
    return str(exc.response.get("Error", {}).get("Code", "")) in _ABSENT


class S3ArtifactStore:
    def __init__(self, location: S3Location, namespace: str = "", client: Any | None = None) -> None:
        self.location = location
        self.namespace = namespace
        self.client = client if client is not None else location.client()

    def within(self, namespace: str) -> ArtifactStore:
        return S3ArtifactStore(self.location, join(self.namespace, namespace), self.client)

    def __reduce__(self) -> tuple[type[S3ArtifactStore], tuple[S3Location, str]]:
        """Sent to a CPU pool process (:mod:`memory.offload`) as its location: it makes a client of its own."""
        return S3ArtifactStore, (self.location, self.namespace)

    @property
    def _folder(self) -> str:
        return f"{self.location.prefix}{self.namespace}/" if self.namespace else self.location.prefix

    def _key(self, sha256: str) -> str:
        return f"{self._folder}{check_digest(sha256)[:2]}/{sha256}"

    def _where(self) -> str:
        return f"the object store (bucket {self.location.bucket!r}, prefix {self._folder!r})"

    @contextmanager
    def _asking(self) -> Iterator[None]:
        try:
            yield
        except (BotoCoreError, ClientError) as exc:
            raise ArtifactStoreUnavailable(
                f"{self._where()} at {self.location.endpoint_url or 'AWS'} could not be asked: {exc}; check that it "
                "runs, that the bucket exists and that MNEMO_ARTIFACT_S3_* name it and its credentials",
                details={"retry_after_seconds": RETRY_AFTER_SECONDS},
            ) from exc

    def _call(self, method: Callable[..., T], **kwargs: Any) -> T:
        with self._asking():
            return method(Bucket=self.location.bucket, **kwargs)

    def check(self) -> None:
        """At start: the bucket exists and the credentials open it (:class:`ArtifactStoreUnavailable` if not)."""
        self._call(self.client.head_bucket)

    def put(self, content: bytes) -> str:
        sha = sha256_hex(content)
        if not self.exists(sha):
            self._call(self.client.put_object, Key=self._key(sha), Body=content, ContentLength=len(content))
        return sha

    def open(self, sha256: str) -> Iterator[bytes]:
        key = self._key(sha256)
        with self._asking():
            try:
                body = self.client.get_object(Bucket=self.location.bucket, Key=key)["Body"]
            except ClientError as exc:
                if _absent(exc):
                    raise missing(sha256, self._where()) from exc
                raise
        return verified(sha256, self._stream(body), self._where())

    def _stream(self, body: Any) -> Iterator[bytes]:
        try:
            with self._asking():
                yield from body.iter_chunks(CHUNK_BYTES)
        finally:
            body.close()

    def exists(self, sha256: str) -> bool:
        key = self._key(sha256)
        with self._asking():
            try:
                self.client.head_object(Bucket=self.location.bucket, Key=key)
            except ClientError as exc:
                if _absent(exc):
                    return False
                raise
        return True

    def delete(self, sha256: str) -> bool:
        if not self.exists(sha256):
            return False
        self._call(self.client.delete_object, Key=self._key(sha256))
        return True

    def list(self) -> Iterator[Stored]:
        found: list[Stored] = []
        folder = self._folder
        with self._asking():
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.location.bucket,
                                                                               Prefix=folder):
                for item in page.get("Contents", []):
                    parts = str(item["Key"])[len(folder):].split("/")
                    # Only this namespace's own objects: <shard>/<sha256>, not a namespace below it.
                    if len(parts) == 2 and len(parts[1]) == 64 and parts[0] == parts[1][:2]:
                        found.append(Stored(parts[1], int(item["Size"]), item["LastModified"]))
        return iter(sorted(found, key=lambda stored: stored.sha256))


__all__ = ["S3ArtifactStore", "S3Location"]
