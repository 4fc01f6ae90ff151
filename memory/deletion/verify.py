"""Targeted checks before a job may report completion: search for what was deleted where it is expected.

These run in addition to the residue scan (:mod:`memory.deletion.residue`), which decides: the scan is
independent of the purge's selection; these checks reuse it, and add what fingerprints cannot see
(vectors, recall as the owner).

Each probe (the original texts and their clauses) is searched lexically (full
text and trigram) and through recall as the owner, and tenant-wide with no
visibility or status filter as an administrator would; storage is also checked
directly (unscrubbed rows, projection rows, lexeme postings, vectors, and the same for the
memories deleted because they were derived only from the job's records); each probe is also
searched by its embedding. A hit on anything the job
covers fails it. The result names where hits were, never the probe text: it is
recorded in workflow history.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import ColumnElement, and_, func, literal, or_, select
from sqlalchemy.orm import Session

from memory.deletion.layers import derived_deleted_by
from memory.deletion.record_layer import record_hits
from memory.deletion.scope import events_in, memories_in, scope_of
from memory.deletion.session_layer import summary_hits
from memory.embedders import configured_embedder
from memory.errors import InvalidInput
from memory.identity.auth import PrincipalContext
from memory.models import DeletionJob, DeletionProbe, Memory, MemoryEvent, MemoryLexeme, MemorySearch
from memory.recall.bundle import build_bundle
from memory.recall.plan import Intent, make_plan
from memory.recall.request import RecallRequest
from memory.text import lexemes, normalize, tsquery_any

TSQUERY_CHUNK = 500
"""Lexemes per ``tsquery``: one of a long probe's ~100,000 lexemes exceeded PostgreSQL's stack depth."""

RECALL_PROBE_CHARS = 2_000
"""The longest query ``/memory-query`` accepts: the owner's recall is asked what the owner could ask."""


@dataclass(frozen=True)
class Verification:
    clean: bool
    probes: int
    hits: dict[str, int]


def verify(session: Session, job: DeletionJob) -> Verification:
    scope, revision = scope_of(job), job.barrier_revision
    covered = memories_in(scope, job.tenant_id, revision)
    covered_ids = select(Memory.memory_id).where(covered)
    hits: Counter[str] = Counter()
    hits["unscrubbed_versions"] = session.execute(
        select(func.count()).select_from(Memory).where(covered, or_(Memory.purged_at.is_(None), Memory.content != ""))
    ).scalar_one()
    hits["projection_rows"] = session.execute(
        select(func.count())
        .select_from(MemorySearch)
        .where(MemorySearch.tenant_id == job.tenant_id, MemorySearch.memory_id.in_(covered_ids))
    ).scalar_one()
    hits["lexeme_postings"] = session.execute(
        select(func.count())
        .select_from(MemoryLexeme)
        .where(MemoryLexeme.tenant_id == job.tenant_id, MemoryLexeme.memory_id.in_(covered_ids))
    ).scalar_one()
    derived = derived_deleted_by(job)
    hits["unscrubbed_derived"] = session.execute(
        select(func.count()).select_from(Memory).where(derived, or_(Memory.purged_at.is_(None), Memory.content != ""))
    ).scalar_one()
    hits["derived_projection_rows"] = session.execute(
        select(func.count())
        .select_from(MemorySearch)
        .where(
            MemorySearch.tenant_id == job.tenant_id,
            MemorySearch.memory_id.in_(select(Memory.memory_id).where(derived)),
        )
    ).scalar_one()
    if scope.type.value != "memory":
        hits["unscrubbed_events"] = session.execute(
            select(func.count())
            .select_from(MemoryEvent)
            .where(events_in(scope, job.tenant_id, revision), MemoryEvent.purged_at.is_(None))
        ).scalar_one()
    owner = PrincipalContext(job.tenant_id, job.subject_user_id, None, frozenset(), key_id="deletion-verifier")
    probes = session.execute(
        select(DeletionProbe.probe).where(DeletionProbe.tenant_id == job.tenant_id, DeletionProbe.job_id == job.job_id)
    ).scalars().all()
    for probe in probes:
        probe_tokens = lexemes(probe)
        if not probe_tokens:
            continue
        hits["tenant_wide_lexical"] += session.execute(
            select(func.count())
            .select_from(MemorySearch)
            .join(Memory, and_(Memory.tenant_id == MemorySearch.tenant_id, Memory.memory_id == MemorySearch.memory_id))
            .where(
                MemorySearch.tenant_id == job.tenant_id,
                covered,
                or_(_any_lexeme(probe_tokens), literal(normalize(probe)).op("<%")(MemorySearch.search_text)),
            )
        ).scalar_one()
        hits["tenant_wide_text"] += session.execute(
            select(func.count()).select_from(Memory).where(covered, Memory.content.contains(probe))
        ).scalar_one()
        hits["vector"] += _vector_hits(session, job.tenant_id, covered, probe)
        recalled = _recalled_by_owner(session, owner, probe[:RECALL_PROBE_CHARS])
        if recalled:
            hits["owner_recall"] += session.execute(
                select(func.count()).select_from(Memory).where(covered, Memory.memory_id.in_(recalled))
            ).scalar_one()
    hits.update(summary_hits(session, job, list(probes)))
    hits.update(record_hits(session, job))
    found = {name: count for name, count in hits.items() if count}
    return Verification(clean=not found, probes=len(probes), hits=found)


def _any_lexeme(probe_tokens: list[str]) -> ColumnElement[bool]:
    """The projection holds any of the probe's lexemes: the full-text operator, over bounded ``tsquery`` chunks."""
    unique = list(dict.fromkeys(probe_tokens))
    chunks = [unique[start : start + TSQUERY_CHUNK] for start in range(0, len(unique), TSQUERY_CHUNK)]
    return or_(*(MemorySearch.tokens.op("@@")(func.to_tsquery("simple", tsquery_any(chunk))) for chunk in chunks))


def _recalled_by_owner(session: Session, owner: PrincipalContext, probe: str) -> list[uuid.UUID]:
    """Every memory the owner's own recall uses for ``probe``: the real pipeline, lexical sources, no floor.

    The ids come from the bundle's version vector, so memories used as preferences count too.
    """
    request = RecallRequest(
        query=probe, plan=make_plan(Intent.ANSWER, candidate_limit=50, inject_limit=50, token_budget=1_000_000),
        retrieval="lexical", min_relevance=0.0,
    )
    try:
        bundle = build_bundle(session, owner, request, datetime.now(UTC)).bundle
    except InvalidInput:  # nothing searchable in the probe
        return []
    return [uuid.UUID(ref.split(":", 1)[1]) for ref in bundle.version_vector
            if ref.startswith(("memory:", "preference:"))]


def _vector_hits(session: Session, tenant_id: str, covered: object, probe: str) -> int:
    """Covered memories among the probe's nearest vectors in the tenant: a deleted text must not be findable by
    meaning."""
    embedder = configured_embedder()
    vector = embedder.embed_query(probe)
    nearest = (
        select(MemorySearch.memory_id)
        # The configured model's vectors only: during a change of model the column holds two dimensions.
        .where(MemorySearch.tenant_id == tenant_id, MemorySearch.embedding.is_not(None),
               MemorySearch.embedding_model == embedder.name)
        .order_by(MemorySearch.embedding.cosine_distance(vector))
        .limit(20)
        .subquery()
    )
    return int(
        session.execute(
            select(func.count()).select_from(Memory).where(covered, Memory.memory_id.in_(select(nearest.c.memory_id)))  # type: ignore[arg-type]
        ).scalar_one()
    )
