"""A task's draft as the approver sees it: the manifest it is bound to (its sha256), the HTML that will be
published, the charts, and the order lines validation rejected. Read through the API's artifact gate."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from api.console.reads import task_artifacts
from api.schemas.tasks import TaskView
from api.services.task_reads import open_artifact
from memory.artifact_store import ArtifactStore
from memory.identity.auth import PrincipalContext

REJECTED_SHOWN = 50


@dataclass(frozen=True)
class Draft:
    sha256: str
    """What an approval is bound to: the draft manifest's sha256."""
    title: str
    revision: int
    html_url: str
    charts: list[tuple[str, str]]
    rejected_total: int
    rejected: list[dict[str, Any]] = field(default_factory=list)


def artifact_bytes(
    engine: Engine, store: ArtifactStore, principal: PrincipalContext, task_id: str, sha256: str
) -> bytes:
    """A small artifact (a manifest, the validation report) whole, through the API's gate."""
    _, chunks = open_artifact(engine, store, principal, task_id, sha256)
    return b"".join(chunks)


def draft_of(view: TaskView, engine: Engine, store: ArtifactStore, principal: PrincipalContext) -> Draft | None:
    """The draft waiting for a decision, else the task's latest draft, else ``None``."""
    pending = view.pending_approval
    sha = (pending.artifact_sha256 if pending else None) or view.draft_sha256
    if sha is None:
        return None
    task_id = view.task_id
    manifest = json.loads(artifact_bytes(engine, store, principal, task_id, sha))
    base = f"/console/tasks/{task_id}/artifacts"
    rejected: list[dict[str, Any]] = []
    validation = [a for a in task_artifacts(engine, principal.tenant_id, task_id) if a.kind == "validation"]
    if validation:
        rejected = json.loads(artifact_bytes(engine, store, principal, task_id, validation[0].sha256))
    return Draft(
        sha256=sha,
        title=manifest["title"],
        revision=manifest["revision"],
        html_url=f"{base}/{manifest['html_sha256']}",
        charts=[(name, f"{base}/{chart}") for name, chart in manifest["charts"].items()],
        rejected_total=len(rejected),
        rejected=rejected[:REJECTED_SHOWN],
    )
