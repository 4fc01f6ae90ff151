"""A draft manifest as the approver sees it: the HTML that will be published, its charts, and the lines validation
rejected. Read through the API's artifact gate.

The manifest is a convention any task type may use (the README's SDK section): a JSON artifact whose object has
``html_sha256`` (an HTML artifact of the same task) and optionally ``title``, ``revision`` and ``charts`` (name →
sha256 of an image artifact). The monthly report's ``draft.json`` is one; its approval is bound to the manifest, so
the page shows what the manifest names.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from api.console.reads import task_artifacts
from api.services.task_reads import open_artifact
from memory.artifact_store import ArtifactStore
from memory.identity.auth import PrincipalContext

REJECTED_SHOWN = 50
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Manifest:
    title: str | None
    revision: int | None
    html_sha256: str
    html_url: str
    charts: list[tuple[str, str]]
    rejected_total: int | None
    """How many lines the task's ``validation`` artifact lists; None when the task has none."""
    rejected: list[dict[str, Any]] = field(default_factory=list)


def artifact_bytes(
    engine: Engine, store: ArtifactStore, principal: PrincipalContext, task_id: str, sha256: str
) -> bytes:
    """A small artifact (a manifest, the validation report) whole, through the API's gate."""
    _, chunks = open_artifact(engine, store, principal, task_id, sha256)
    return b"".join(chunks)


def is_manifest(body: object) -> bool:
    """Whether a JSON artifact's body follows the manifest convention (it names its HTML by sha256)."""
    return isinstance(body, dict) and isinstance(body.get("html_sha256"), str) \
        and bool(_SHA256.match(body["html_sha256"]))


def manifest_view(
    engine: Engine, store: ArtifactStore, principal: PrincipalContext, task_id: str, manifest: dict[str, Any]
) -> Manifest:
    """What a manifest names, as console URLs (each served through the artifact gate when the browser asks)."""
    base = f"/console/tasks/{task_id}/artifacts"
    charts = manifest.get("charts")
    validation = [a for a in task_artifacts(engine, principal.tenant_id, task_id) if a.kind == "validation"]
    rejected: list[dict[str, Any]] | None = None
    if validation:
        try:
            lines = json.loads(artifact_bytes(engine, store, principal, task_id, validation[0].sha256))
        except ValueError:  # any step may name its artifact's kind "validation": not JSON, not these lines
            lines = None
        rejected = lines if isinstance(lines, list) else None  # another type's "validation" is not these lines
    title, revision = manifest.get("title"), manifest.get("revision")
    return Manifest(
        title=title if isinstance(title, str) else None,
        revision=revision if isinstance(revision, int) else None,
        html_sha256=manifest["html_sha256"],
        html_url=f"{base}/{manifest['html_sha256']}",
        charts=[(str(name), f"{base}/{sha}") for name, sha in (charts.items() if isinstance(charts, dict) else ())
                if isinstance(sha, str) and _SHA256.match(sha)],
        rejected_total=None if rejected is None else len(rejected),
        rejected=(rejected or [])[:REJECTED_SHOWN],
    )
