"""MEMORY_BUNDLE_BUILT: one audit event per bundle, with ids, versions, counts and reasons — never content."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from memory.identity.auth import PrincipalContext
from memory.models import AuditEntry
from memory.recall.bundle_types import Bundle, JsonValue

ACTION = "MEMORY_BUNDLE_BUILT"
_INSERT = insert(AuditEntry.__table__)  # type: ignore[arg-type]


def record_bundle(session: Session, principal: PrincipalContext, query: str, bundle: Bundle,
                  filtered: Mapping[str, int], purpose: str | None) -> None:
    selected = [f"{i.memory_id}@{i.version}" for i in bundle.items]
    selected += [f"knowledge:{k.knowledge_id}@{k.version}" for k in bundle.knowledge]
    if bundle.task_state is not None:
        selected.append(f"task:{bundle.task_state.task_id}@{bundle.task_state.state_version}")
    # A Core INSERT built once, on the session's connection (its transaction), not an ORM object: nothing
    # reads the row back, and the unit of work's flush cost ~2 ms a bundle.
    session.connection().execute(_INSERT, dict(
        tenant_id=principal.tenant_id, actor=principal.user_id, action=ACTION,
        detail={
            "trace_id": bundle.trace_id,
            "principal": {"user_id": principal.user_id, "agent_id": principal.agent_id, "key_id": principal.key_id},
            "purpose": purpose,
            "intent": bundle.plan.intent.value,
            "query_sha256": hashlib.sha256(query.encode()).hexdigest(),
            "selected_refs": selected,
            "filtered_by_reason": dict(filtered),
            # Fact keys can be personal ("home_city"): only their hashes, which deletion may keep.
            "decisions": [
                {"key_sha256": _sha256(d.get("key")), "reason": d["reason"]} for d in bundle.conflict_decisions
            ],
            "conflicts": [_sha256(c.key) for c in bundle.conflicts],
            "snapshot_revision": bundle.snapshot_revision,
            "truncated_by_budget": bundle.truncated_by_budget,
        },
    ))


def _sha256(value: JsonValue) -> str | None:
    """A fact key's hash (a decision's key is a string, or None for a keyless duplicate)."""
    return hashlib.sha256(str(value).encode()).hexdigest() if value is not None else None


def bundle_events(session: Session, tenant_id: str, trace_id: str | None, limit: int) -> list[AuditEntry]:
    statement = select(AuditEntry).where(AuditEntry.tenant_id == tenant_id, AuditEntry.action == ACTION)
    if trace_id is not None:
        statement = statement.where(AuditEntry.detail["trace_id"].astext == trace_id)
    return list(session.execute(statement.order_by(AuditEntry.audit_id.desc()).limit(limit)).scalars())
