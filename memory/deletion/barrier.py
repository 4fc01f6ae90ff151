"""The deletion barrier: one transaction, committed before the API answers 202.

It bumps the subject's deletion epoch, writes tombstones, marks every covered
memory version DELETED, does the same for every memory whose evidence is only
the deleted records (transitively: :func:`memory.deletion.layers.hide_orphans`,
the purge's own rule), withdraws the published knowledge resting only on them
(:func:`memory.deletion.knowledge_layer.withdraw_at_once`) and stores the verification
probes. From its commit on, no read or recall returns the targets or what was derived
only from them, and a writer holding the old epoch is refused.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass

from sqlalchemy import select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.deletion import outbox
from memory.deletion.deleted_texts import store_fingerprints
from memory.deletion.jobs import Layer, get_job, workflow_id
from memory.deletion.knowledge_layer import withdraw_at_once
from memory.deletion.layers import deleted_links, hide_orphans
from memory.deletion.ownership import require_target
from memory.deletion.scope import Scope, ScopeType, events_in, linked_refs, memories_in
from memory.enums import Role, Status
from memory.epochs import bump_epoch
from memory.errors import Forbidden, IdempotencyConflict, NotFound
from memory.identity.auth import PrincipalContext
from memory.identity.keys import revoke_keys
from memory.models import AuditEntry, DeletionJob, DeletionLayer, DeletionProbe, Memory, MemoryEvent, Tombstone
from memory.resources.records import not_forgotten, own_record, ref_of
from memory.store.events import next_revision
from memory.store.permissions import MemoryAction, require
from memory.store.visibility import not_tombstoned, visible_to

MAX_PROBES = 200
_CLAUSE = re.compile(r"[^。！？!?；;\n.]+")


@dataclass(frozen=True)
class ScopeRequest:
    """A scope as the caller asked for it, before authorisation."""

    type: ScopeType
    memory_id: uuid.UUID | None = None
    event_id: uuid.UUID | None = None
    session_id: str | None = None
    user_id: str | None = None
    resource: str | None = None
    record_id: str | None = None


@dataclass(frozen=True)
class Accepted:
    job: DeletionJob
    created: bool


def _subject_for(principal: PrincipalContext, requested_user: str | None) -> str:
    """Whose data: yourself, or, for an admin, the target user (authorised by role, not trusted as identity)."""
    user = requested_user or principal.user_id
    if user != principal.user_id and not principal.has(Role.ADMIN):
        raise Forbidden("deleting another user's data needs the admin role")
    return user


def resolve_scope(session: Session, principal: PrincipalContext, request: ScopeRequest) -> Scope:
    """Authorise the request and find its subject. What the caller cannot see is a 404."""
    if request.type is ScopeType.MEMORY:
        assert request.memory_id is not None
        visible = visible_to(principal) if not principal.has(Role.ADMIN) else Memory.tenant_id == principal.tenant_id
        memory = session.execute(
            select(Memory).where(
                visible,
                Memory.memory_id == request.memory_id,
                Memory.status.notin_([Status.SUPERSEDED.value, Status.DELETED.value]),
                not_tombstoned(),
            )
        ).scalar_one_or_none()
        if memory is None:
            raise NotFound(f"memory {request.memory_id} does not exist")
        require(principal, MemoryAction.DELETE, memory.space)
        return Scope(ScopeType.MEMORY, str(memory.memory_id), memory.owner_id)
    if request.type is ScopeType.EVENT:
        assert request.event_id is not None
        event = session.execute(
            select(MemoryEvent).where(
                MemoryEvent.tenant_id == principal.tenant_id,
                MemoryEvent.event_id == request.event_id,
                MemoryEvent.purged_at.is_(None),
            )
        ).scalar_one_or_none()
        if event is None or (event.user_id != principal.user_id and not principal.has(Role.ADMIN)):
            raise NotFound(f"event {request.event_id} does not exist")
        return Scope(ScopeType.EVENT, str(event.event_id), event.user_id)
    if request.type is ScopeType.RECORD:
        assert request.resource is not None and request.record_id is not None
        ref = ref_of(request.resource, request.record_id)
        # The caller's own record, not yet covered by a deletion: anyone else's is as missing as one never written.
        if session.execute(
            own_record(principal, request.resource, request.record_id).where(not_forgotten())
        ).first() is None:
            raise NotFound(f"no record {ref}")
        return Scope(ScopeType.RECORD, ref, principal.user_id)
    subject = _subject_for(principal, request.user_id)
    if request.type is ScopeType.SESSION:
        assert request.session_id is not None
        return Scope(ScopeType.SESSION, request.session_id, subject)
    return Scope(ScopeType.SUBJECT, subject, subject)


def _probe_texts(texts: list[str]) -> list[str]:
    """What verification searches for: each text, and each clause of it (a crude paraphrase set)."""
    probes: dict[str, None] = {}
    for original in texts:
        if not original.strip():
            continue
        probes[original.strip()] = None
        for clause in _CLAUSE.findall(original):
            if len(clause.strip()) >= 4:
                probes[clause.strip()] = None
    return list(probes)[:MAX_PROBES]


def probe_digest(probe: str) -> str:
    """A probe's key: its SHA-256, because the text itself can be longer than a B-tree row (migration 0012)."""
    return hashlib.sha256(probe.encode()).hexdigest()


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def request_deletion(
    session: Session, principal: PrincipalContext, deletion_request_id: str, request: ScopeRequest, digest: str,
    *, alone: bool = False,
) -> Accepted:
    """Idempotent by (tenant, requester, deletion_request_id): a repeat returns the same job and never re-bumps the
    epoch; the same id of another request is a 409.

    ``alone``: the barrier is its transaction's only write, so the subject's kept words may be read on another
    connection (:func:`memory.deletion.deleted_texts.store_fingerprints`). A caller that wrote first (a message
    saying "don't remember ...", stored in the same transaction) must leave it False: another connection cannot
    see those uncommitted words, which would then be fingerprinted as deleted.

    Request ids are the requester's own (memory.deletion.ownership): another user's equal id is another id.
    Concurrent first requests with one id queue on an advisory lock.
    """
    session.execute(
        text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
        {"key": f"deletion:{principal.tenant_id}:{principal.user_id}:{deletion_request_id}"},
    )
    existing = session.execute(
        select(DeletionJob).where(
            DeletionJob.tenant_id == principal.tenant_id, DeletionJob.requested_by == principal.user_id,
            DeletionJob.deletion_request_id == deletion_request_id,
        )
    ).scalar_one_or_none()
    if existing is not None:
        if existing.request_sha256 != digest:
            raise IdempotencyConflict(
                f"deletion_request_id {deletion_request_id!r} was already used for a different request"
            )
        return Accepted(existing, created=False)

    scope = resolve_scope(session, principal, request)
    require_target(session, principal.tenant_id, scope)  # nothing is written for what is not there
    tenant = principal.tenant_id
    epoch = bump_epoch(session, tenant, scope.subject)  # exclusive lock: in-flight writes finish first
    revision = next_revision(session)
    job_id = uuid.uuid4()
    job = DeletionJob(
        tenant_id=tenant,
        job_id=job_id,
        deletion_request_id=deletion_request_id,
        request_sha256=digest,
        scope_type=scope.type.value,
        scope=scope.as_json(),
        subject_user_id=scope.subject,
        requested_by=principal.user_id,
        status="accepted",
        epoch=epoch,
        barrier_revision=revision,
        workflow_id=workflow_id(tenant, principal.user_id, deletion_request_id),
    )
    session.add(job)
    session.flush()

    covered = memories_in(scope, tenant, revision)
    rows = session.execute(select(Memory.content, Memory.abstract, Memory.key).where(covered)).all()
    events = session.execute(select(MemoryEvent.payload).where(events_in(scope, tenant, revision))).scalars().all()
    texts = [t for row in rows for t in (row.content, row.abstract, row.key) if t]
    texts += [s for payload in events for s in _strings(payload)]
    for probe in _probe_texts(texts):
        session.add(DeletionProbe(tenant_id=tenant, job_id=job_id, probe_sha256=probe_digest(probe), probe=probe))

    session.execute(
        insert(Tombstone)
        .values(
            tenant_id=tenant,
            target_type=scope.type.value,
            target_id=scope.target_id,
            owner_user_id=scope.subject,
            job_id=job_id,
            revision=revision,
        )
        # A target deleted before (a subject, a record written again since) is covered up to this barrier now.
        .on_conflict_do_update(index_elements=["tenant_id", "target_type", "target_id", "owner_user_id"],
                               set_={"job_id": job_id, "revision": revision})
    )
    session.execute(update(Memory).where(covered).values(status=Status.DELETED.value))
    derived = hide_orphans(session, job, linked_refs(session, scope, tenant, revision), revision)
    fingerprints = store_fingerprints(session, job, scope, derived, read_apart=alone)
    # Knowledge resting only on what goes, or holding its words, is withdrawn now: the next recall must not tell it
    # as fact, and no reviewer may approve it meanwhile (judged by the fingerprints just kept).
    knowledge_withdrawn = withdraw_at_once(session, job, deleted_links(session, job))
    outbox.enqueue(session, tenant, job_id)
    # A subject deletion forgets the person: their keys must not write new data about them afterwards.
    # A person deleting themselves keeps the key they asked with, to follow the job to its proof.
    revoked = (
        revoke_keys(session, tenant, scope.subject, actor=principal.user_id,
                    reason=f"subject deletion {deletion_request_id}",
                    keep=principal.key_id if principal.user_id == scope.subject else None)
        if scope.type is ScopeType.SUBJECT else []
    )
    for position, layer in enumerate(Layer):
        session.add(
            DeletionLayer(tenant_id=tenant, job_id=job_id, layer=layer.value, position=position, status="pending")
        )
    session.add(
        AuditEntry(
            tenant_id=tenant,
            actor=principal.user_id,
            action="DELETION_REQUESTED",
            memory_id=uuid.UUID(scope.target_id) if scope.type is ScopeType.MEMORY else None,
            job_id=job_id,
            detail={"scope_type": scope.type.value, "covered_versions": len(rows), "derived_hidden": len(derived),
                    "knowledge_withdrawn": knowledge_withdrawn,
                    "epoch": epoch, "keys_revoked": len(revoked),
                    "fingerprints": fingerprints},
        )
    )
    session.flush()
    return Accepted(get_job(session, tenant, job_id), created=True)


__all__ = ["Accepted", "ScopeRequest", "probe_digest", "request_deletion", "resolve_scope"]
