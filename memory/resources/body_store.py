"""The record store a session works with, and the locks that keep a body's bytes and the rows naming them in step.

The store is outside the database transaction. A body is deleted while the transaction that removed the rows
naming it still holds an advisory lock on its sha256; a record write naming the same bytes takes that lock and
writes the bytes again (:func:`guard_bodies`), so whichever commits second finds what it needs: a write never
commits naming bytes a deletion removed (:mod:`memory.deletion.record_layer` purges, :mod:`memory.resources.records`
writes).
"""

from __future__ import annotations

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from memory.artifact_store import ArtifactStore
from memory.resources.models import ResourceArtifact

STORE_KEY = "mnemo.record_store"
"""Where a deletion activity puts the tenant's record store in ``Session.info`` (:func:`bind_store`)."""


def bind_store(session: Session, store: ArtifactStore) -> None:
    """Give this session's purge and verification the tenant's record store (the worker knows the data dir)."""
    session.info[STORE_KEY] = store


def bound_store(session: Session) -> ArtifactStore:
    """The record store :func:`bind_store` gave this session."""
    store: ArtifactStore | None = session.info.get(STORE_KEY)
    if store is None:
        raise RuntimeError("no record store bound to this session: the deletion worker must bind_store() first")
    return store


def guard_bodies(session: Session, shas: list[str]) -> None:
    """Take the advisory lock of each body (sorted, so two transactions never wait on each other in a cycle)."""
    for sha in sorted(set(shas)):
        session.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
                        {"key": f"record-body:{sha}"})


def drop_unreferenced(session: Session, store: ArtifactStore, tenant_id: str, shas: list[str]) -> int:
    """Delete from ``store`` each of these bodies that no record of the tenant references; how many went.

    Each is checked and deleted under its lock (held to the end of the transaction), so a write naming the
    same bytes either committed first (the body stays) or finds them gone and writes them again."""
    guard_bodies(session, shas)
    removed = 0
    for sha in sorted(set(shas)):
        if not referenced(session, tenant_id, sha) and store.delete(sha):
            removed += 1
    return removed


def referenced(session: Session, tenant_id: str, sha: str) -> bool:
    """Does any record of the tenant still name this body?"""
    return session.execute(
        select(ResourceArtifact.sha256).where(ResourceArtifact.tenant_id == tenant_id, ResourceArtifact.sha256 == sha)
        .limit(1)
    ).first() is not None


__all__ = ["STORE_KEY", "bind_store", "bound_store", "drop_unreferenced", "guard_bodies", "referenced"]
