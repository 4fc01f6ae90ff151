"""A task's outputs: artifact metadata in the read model, their bytes in a content-addressed store.

The store is directory-backed and idempotent by construction: artifacts are named by the SHA-256 of
their bytes, and every write is a rename of a finished temporary file, so a crash never leaves half a file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.errors import NotFound
from memory.tasks.models import TaskArtifact


def sha256_hex(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


class ArtifactStore:
    """Content-addressed bytes under ``root``: storing the same content twice stores it once."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def under(cls, data_dir: Path) -> ArtifactStore:
        """The store of a data directory (the worker writes it, the API reads it)."""
        return cls(data_dir / "artifacts")

    def path(self, sha256: str) -> Path:
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            raise ValueError(f"not a sha256 hex digest: {sha256!r}")
        return self.root / sha256[:2] / sha256

    def put(self, content: bytes) -> str:
        sha = sha256_hex(content)
        target = self.path(sha)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as handle:
                handle.write(content)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(handle.name, target)
        return sha

    def get(self, sha256: str) -> bytes:
        """The bytes, checked against their name: a corrupted file is an error, not content."""
        content = self.path(sha256).read_bytes()
        if sha256_hex(content) != sha256:
            raise OSError(f"artifact {sha256} is corrupted on disk")
        return content


@dataclass(frozen=True)
class ArtifactMeta:
    sha256: str
    name: str
    kind: str
    media_type: str
    size_bytes: int


def add_artifacts(session: Session, tenant_id: str, task_id: str, step_id: str, artifacts: list[ArtifactMeta]) -> None:
    """Content-addressed: the same bytes for the same task are one row, however often they are stored."""
    for meta in artifacts:
        session.execute(
            insert(TaskArtifact)
            .values(
                tenant_id=tenant_id,
                task_id=task_id,
                sha256=meta.sha256,
                name=meta.name,
                kind=meta.kind,
                media_type=meta.media_type,
                size_bytes=meta.size_bytes,
                step_id=step_id,
            )
            .on_conflict_do_nothing()
        )


def get_artifact(session: Session, tenant_id: str, task_id: str, sha256: str) -> TaskArtifact:
    row = session.execute(
        select(TaskArtifact).where(
            TaskArtifact.tenant_id == tenant_id, TaskArtifact.task_id == task_id, TaskArtifact.sha256 == sha256
        )
    ).scalar_one_or_none()
    if row is None:
        raise NotFound(f"artifact {sha256} does not exist in task {task_id}")
    return row
