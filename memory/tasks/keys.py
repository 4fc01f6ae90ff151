"""Idempotency keys of seed 003 §8.2 and the identities derived from them.

The same business intent always yields the same key, so a retried request,
activity or replay finds the first result instead of producing a second one.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

_TASK_NAMESPACE = uuid.UUID("6f1c1c8e-4a2b-5b7e-9d3a-2f0e8c7d6b5a")


def digest(value: Any) -> str:
    """``sha256:<hex>`` of a canonical JSON rendering (sorted keys, no whitespace)."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def create_key(tenant_id: str, user_id: str, request_intent_id: str) -> str:
    """Creating a task: user + request_intent_id (within the tenant)."""
    return f"create:{tenant_id}:{user_id}:{request_intent_id}"


def task_id_for(tenant_id: str, user_id: str, request_intent_id: str) -> str:
    """The task id is a function of the create key, so creating twice names the same task."""
    return str(uuid.uuid5(_TASK_NAMESPACE, create_key(tenant_id, user_id, request_intent_id)))


def workflow_id(tenant_id: str, task_id: str) -> str:
    return f"task-{tenant_id}-{task_id}"


def step_key(task_id: str, step_id: str, input_version: str) -> str:
    """Running a step: task + step + logical input version."""
    return f"step:{task_id}:{step_id}:{input_version}"


def approval_key(task_id: str, artifact_sha256: str, approval_type: str) -> str:
    """Requesting approval: task + artifact hash + approval type."""
    return f"approval:{task_id}:{artifact_sha256}:{approval_type}"


def publish_key(task_id: str, final_artifact_sha256: str, destination: str) -> str:
    """Publishing: task + final artifact hash + destination."""
    return f"publish:{task_id}:{final_artifact_sha256}:{destination}"
