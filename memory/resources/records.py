"""Source records: written whole, versioned optimistically, each the caller's own.

A record is named by its type and id (its ref: ``todo:t-1``) and belongs to the user of the key that
wrote it: another user's or tenant's record is exactly as missing as one never written. A write without
``expected_version`` creates; an update names the version it replaces, and a stale one is a 409 carrying
``current_version``; the same data written again is a replay that answers the current version. The
record, its long fields' metadata and its search projection change in one transaction.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, Engine, and_, delete, exists, or_, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from memory.artifact_store import ArtifactStore
from memory.db import tenant_session
from memory.epochs import current_epoch
from memory.errors import Conflict, Forbidden, InvalidInput, NotFound, VersionConflict
from memory.identity.auth import PrincipalContext
from memory.identity.ids import default_request_id
from memory.models import DeletionJob, Tombstone
from memory.resources.bodies import Body, Offloaded, encode, restore, split
from memory.resources.body_store import drop_unreferenced, guard_bodies
from memory.resources.declarations import RECORD_ID, RECORDS, STORES, Declaration
from memory.resources.models import ResourceArtifact, ResourceRecord
from memory.resources.projection import write_record_projection
from memory.resources.runs import reads_under_policy
from memory.resources.validation import check_record
from memory.store.events import next_revision

logger = logging.getLogger("mnemo.resources")

_RECORD_ID = re.compile(RECORD_ID)


@dataclass(frozen=True)
class Written:
    record: ResourceRecord
    created: bool
    replayed: bool
    released: tuple[str, ...] = ()
    """Bodies the previous version named and this one does not: once the write commits, each one no record of
    the tenant references any more is deleted (:func:`release_bodies`)."""


@dataclass(frozen=True)
class StoredRecord:
    record: ResourceRecord
    data: dict[str, Any]
    """The whole data, long fields read back from the artifact store."""
    long_fields: list[Offloaded]


def ref_of(resource: str, record_id: str) -> str:
    return f"{resource}:{record_id}"


def _digest(data: dict[str, Any]) -> str:
    return hashlib.sha256(encode(data).encode("utf-8")).hexdigest()


class RecordBeingDeleted(Conflict):
    code = "record_deletion_pending"


def require_record_type(declaration: Declaration) -> None:
    """``/records`` writes, reads and deletes source records only: a type whose rows live elsewhere (mnemo's own
    memories, sessions, tasks) is refused with how it is written instead."""
    if declaration.store != RECORDS:
        raise InvalidInput(
            f"{declaration.type!r} is not a record type: {STORES[declaration.store]}; read it with"
            f" GET /resources/{declaration.type} and POST /resources/read",
            code="not_a_record_type",
        )


def require_users_own_key(principal: PrincipalContext) -> None:
    """``/records`` is how the user's own apps write their data and read it back whole. A key that reads under an
    agent's policy (bound to an agent, or the runtime's) reads with list / search / read, inside the policy's
    fields; here it would read a record whole, or learn a field it may not read from whether a write of a guess
    is a replay, and a policy grants no write at all."""
    if reads_under_policy(principal):
        raise Forbidden("an agent's key reads records with list, search and read (GET /resources/{type}, POST "
                        "/resources/search, POST /resources/read), within its policy; /records takes the user's own "
                        "keys", code="agent_key_on_records")


def not_forgotten() -> ColumnElement[bool]:
    """No deletion barrier covers the record: a subject tombstone of its owner, or a tombstone of the record
    itself, at or after the revision it was written in. From the barrier's commit on, a covered record is
    as missing as one never written; the purge removes it later (:mod:`memory.deletion.record_layer`)."""
    return ~exists().where(
        Tombstone.tenant_id == ResourceRecord.tenant_id,
        Tombstone.owner_user_id == ResourceRecord.owner_id,
        Tombstone.revision >= ResourceRecord.revision,
        or_(
            and_(Tombstone.target_type == "subject", Tombstone.target_id == ResourceRecord.owner_id),
            and_(Tombstone.target_type == "record",
                 Tombstone.target_id == ResourceRecord.resource + ":" + ResourceRecord.record_id),
        ),
    )


def own_record(principal: PrincipalContext, resource: str, record_id: str) -> Any:
    """The caller's record of that type and id (a select of it)."""
    return select(ResourceRecord).where(
        ResourceRecord.tenant_id == principal.tenant_id,
        ResourceRecord.owner_id == principal.user_id,
        ResourceRecord.resource == resource,
        ResourceRecord.record_id == record_id,
    )


def put_record(
    session: Session,
    principal: PrincipalContext,
    declaration: Declaration,
    record_id: str,
    data: dict[str, Any],
    expected_version: int | None,
    store: ArtifactStore,
    wrote: list[str] | None = None,
) -> Written:
    """Create (``expected_version`` None) or update the caller's record, with its long fields and projection.

    The long bodies are written only once the write is judged (its row locked, its tombstone and version
    checked); the sha256 of each one this call put in the store is appended to ``wrote``, so a caller whose
    transaction then fails can delete them again (:func:`save_record`)."""
    require_users_own_key(principal)
    require_record_type(declaration)
    if not _RECORD_ID.fullmatch(record_id):
        raise InvalidInput("record ids are 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit",
                           code="invalid_record_id")
    check_record(declaration, data)
    # Share-locks the subject's deletion epoch to the end of the transaction, as every write about a user does
    # (memory.epochs): a subject deletion's barrier waits for this write, which is then before it and purged.
    current_epoch(session, principal.tenant_id, principal.user_id)
    digest = _digest(data)
    inline, bodies = split(declaration, data)
    ref = ref_of(declaration.type, record_id)
    record = session.execute(own_record(principal, declaration.type, record_id).with_for_update()).scalar_one_or_none()
    if record is None:
        if expected_version is not None:
            raise NotFound(f"no record {ref}: create it without expected_version")
        created = session.execute(
            insert(ResourceRecord)
            .values(tenant_id=principal.tenant_id, owner_id=principal.user_id, resource=declaration.type,
                    record_id=record_id, version=1, data=inline, data_sha256=digest, revision=next_revision(session))
            .on_conflict_do_nothing()
            .returning(ResourceRecord.version)
        ).scalar_one_or_none()
        # Nothing inserted: a concurrent request created it first, and this one is judged against that.
        record = session.execute(
            own_record(principal, declaration.type, record_id).with_for_update()
        ).scalar_one()
        if created is not None:
            _write_derived(session, record, declaration, data, bodies, store, wrote)
            return Written(record, created=True, replayed=False)
    if session.execute(own_record(principal, declaration.type, record_id).where(not_forgotten())).first() is None:
        raise RecordBeingDeleted(f"record {ref} is being deleted: write it again once its deletion job completes")
    if record.data_sha256 == digest:
        return Written(record, created=False, replayed=True)
    if expected_version is None:
        raise VersionConflict(
            f"record {ref} exists (version {record.version}): send expected_version to update it",
            details={"current_version": record.version},
        )
    if expected_version != record.version:
        raise VersionConflict(
            f"record {ref} is at version {record.version}, not {expected_version}: re-read it and retry",
            details={"current_version": record.version},
        )
    record.version += 1
    record.data = inline
    record.data_sha256 = digest
    record.updated_at = datetime.now(UTC)
    record.revision = next_revision(session)
    session.flush()
    released = _write_derived(session, record, declaration, data, bodies, store, wrote)
    return Written(record, created=False, replayed=False, released=released)


def _write_derived(session: Session, record: ResourceRecord, declaration: Declaration, data: dict[str, Any],
                   bodies: list[Body], store: ArtifactStore, wrote: list[str] | None) -> tuple[str, ...]:
    """The record's long fields (bytes and rows) and projection; returns the bodies its previous version named
    alone."""
    key = {"tenant_id": record.tenant_id, "owner_id": record.owner_id, "resource": record.resource,
           "record_id": record.record_id}
    previous = session.execute(delete(ResourceArtifact).filter_by(**key).returning(ResourceArtifact.sha256))
    kept = {body.offloaded.sha256 for body in bodies}
    released = tuple(sorted({sha for sha in previous.scalars() if sha not in kept}))
    # A deletion removing a body takes the same lock (memory.resources.body_store): past it, the bytes either
    # stay or are gone for good, and this write puts them (again) before its transaction names them.
    guard_bodies(session, sorted(kept))
    for body in bodies:
        if not store.exists(body.offloaded.sha256):
            store.put(body.content)
            if wrote is not None:
                wrote.append(body.offloaded.sha256)
    for body in bodies:
        long_field = body.offloaded
        session.add(ResourceArtifact(**key, field_path=long_field.path, sha256=long_field.sha256,
                                     size_bytes=long_field.size_bytes, characters=long_field.characters))
    session.flush()
    write_record_projection(session, record, declaration, data)
    return released


def save_record(
    engine: Engine,
    principal: PrincipalContext,
    declaration: Declaration,
    record_id: str,
    data: dict[str, Any],
    expected_version: int | None,
    store: ArtifactStore,
) -> Written:
    """:func:`put_record` in a transaction of its own. If it fails after putting bodies in the store (the
    search index refuses a field, the commit fails), those no record of the tenant references are deleted
    again, in a fresh transaction under each body's lock: a refused write leaves no bytes behind."""
    wrote: list[str] = []
    try:
        with tenant_session(engine, principal.tenant_id) as session:
            return put_record(session, principal, declaration, record_id, data, expected_version, store, wrote)
    except BaseException:
        if wrote:
            release_bodies(engine, principal.tenant_id, store, tuple(wrote))
        raise


def release_bodies(engine: Engine, tenant_id: str, store: ArtifactStore, shas: tuple[str, ...]) -> int:
    """After an update committed (or a write failed): delete these bodies no record of the tenant references
    (another record may name the same bytes). Best effort: the write's outcome stands whatever happens here, so a
    failure is logged, not raised; like a crash before this, it leaves unreferenced bytes a subject deletion
    sweeps."""
    if not shas:
        return 0
    try:
        with tenant_session(engine, tenant_id) as session:
            return drop_unreferenced(session, store, tenant_id, list(shas))
    except Exception:
        logger.exception("could not delete %d unreferenced record bodies of tenant %s", len(shas), tenant_id)
        return 0


def default_deletion_request_id(session: Session, principal: PrincipalContext, resource: str, record_id: str) -> str:
    """What ``DELETE /records/{resource}/{record_id}`` is idempotent by when the caller names no
    ``deletion_request_id``: the request of the deletion that already covers the record (or covered it and
    purged it), else one id per written incarnation of it (the revision it was last written in), so a record
    written again after its deletion is deleted again rather than answered with the old job."""
    ref = ref_of(resource, record_id)
    revision = session.execute(
        own_record(principal, resource, record_id).with_only_columns(ResourceRecord.revision)
    ).scalar_one_or_none()
    covering = (
        select(DeletionJob.deletion_request_id)
        .join(Tombstone, and_(Tombstone.tenant_id == DeletionJob.tenant_id, Tombstone.job_id == DeletionJob.job_id))
        .where(Tombstone.tenant_id == principal.tenant_id, Tombstone.target_type == "record",
               DeletionJob.requested_by == principal.user_id,
               Tombstone.target_id == ref, Tombstone.owner_user_id == principal.user_id)
    )
    if revision is not None:
        covering = covering.where(Tombstone.revision >= revision)
    existing = session.execute(covering.limit(1)).scalar_one_or_none()
    if existing is not None:
        return str(existing)
    return default_request_id(session, principal, "record", ref if revision is None else f"{ref}-r{revision}")


def get_record(session: Session, principal: PrincipalContext, declaration: Declaration, record_id: str,
               store: ArtifactStore) -> StoredRecord:
    """The caller's record with its whole data; anyone else's is the 404 of a missing one."""
    require_users_own_key(principal)
    require_record_type(declaration)
    record = session.execute(
        own_record(principal, declaration.type, record_id).where(not_forgotten())
    ).scalar_one_or_none()
    if record is None:
        raise NotFound(f"no record {ref_of(declaration.type, record_id)}")
    rows = session.execute(
        select(ResourceArtifact)
        .filter_by(tenant_id=record.tenant_id, owner_id=record.owner_id, resource=record.resource,
                   record_id=record.record_id)
        .order_by(ResourceArtifact.field_path)
    ).scalars()
    long_fields = [Offloaded(row.field_path, row.sha256, row.size_bytes, row.characters) for row in rows]
    return StoredRecord(record, restore(store, record.data, long_fields), long_fields)
