"""A task's outputs: artifact metadata in the read model, their bytes in the shared artifact store.

The bytes are in the ``tasks`` namespace of :class:`memory.artifact_store.ArtifactStore`, content-addressed:
every replica and worker reads what any of them wrote, and the same bytes are stored once.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.artifact_store import ArtifactStore
from memory.errors import NotFound
from memory.tasks.models import TaskArtifact

NAMESPACE = "tasks"


def task_store(root: ArtifactStore) -> ArtifactStore:
    """Where report tasks' artifacts are (shared by every tenant: a row names the bytes it may read)."""
    return root.within(NAMESPACE)


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


def step_artifacts(session: Session, tenant_id: str, task_id: str, step_id: str) -> dict[str, str]:
    """A step's artifacts by name, the latest of each (a redrafted step's newest revision): name → sha256."""
    rows = session.execute(
        select(TaskArtifact.name, TaskArtifact.sha256)
        .where(TaskArtifact.tenant_id == tenant_id, TaskArtifact.task_id == task_id, TaskArtifact.step_id == step_id)
        .order_by(TaskArtifact.created_at)
    ).all()
    return {name: sha for name, sha in rows}
