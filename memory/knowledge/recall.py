"""The knowledge source of a memory bundle: published, reviewed knowledge only (issue 27 §3, seed 003 §9, §12).

Hard filters first, in SQL, before any ranking: the tenant, status ACTIVE, authority P0-P2, scope TENANT or the
request's PROJECT, and the validity window. A candidate (a row of ``knowledge_candidates``) is never read here, and a
P3 item never passes, whatever its score: that is how the model's own conclusions are kept out of what it is told
is fact. Then candidates by exact key, full text, trigram and vector, each capped, ranked by an explained score and
packed in their own token quota. What the query matches but is SUPERSEDED or past its validity is not a fact: it
becomes a warning naming the item, its version and what replaced it or when it expired.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, Text, and_, func, literal, or_, select
from sqlalchemy.orm import Session

from memory.embedders.schema import of_dimensions, typed
from memory.knowledge.content import RECALLED_AUTHORITIES, ScopeType
from memory.knowledge.models import KnowledgeItem
from memory.recall.candidates import dimensions_of
from memory.text import lexemes, normalize, tsquery_any
from memory.tokens import within_budget

VECTOR_FLOOR = 0.85
"""Cosine under which a vector match counts for nothing. Higher than the memory source's SEMANTIC_FLOOR: there the
cosine is one part of a weighted relevance, here relevance is the strongest signal alone, and the bundled e5 puts
unrelated short texts at 0.78-0.83 (memory.recall.selection): a policy must not enter every answer for being short."""
AUTHORITY_PRIOR = {"P0": 0.2, "P1": 0.1, "P2": 0.0}
"""A formal policy outranks a runbook, which outranks a confirmed ticket, at equal relevance (seed 003 §9)."""
TRIGRAM_MAX_QUERY_CHARS = 32
"""As the memory source: a sentence has so many trigrams that everything matches a little."""


@dataclass(frozen=True)
class KnowledgeQuery:
    """What the knowledge source reads of a recall request (memory.recall.bundle.knowledge_query makes it)."""

    query: str
    terms: Sequence[str]
    keys: Sequence[str]
    project_id: str | None
    query_vector: str | None
    """pgvector's text form of the query embedding (None: lexical only)."""
    model: str | None
    candidate_limit: int
    """Per source, as the memory source's."""
    inject_limit: int
    token_budget: int
    """The plan's knowledge quota, apart from the memories' budget."""
    min_relevance: float


@dataclass(frozen=True)
class KnowledgeEntry:
    """One published item injected as a fact, with where it applies, what it rests on and why it ranked."""

    knowledge_id: str
    version: int
    key: str | None
    claim: str
    authority: str
    scope: Mapping[str, str | None]
    validity: Mapping[str, str | None]
    source_refs: tuple[str, ...]
    score: float
    score_breakdown: Mapping[str, float]
    matched_by: tuple[str, ...]


@dataclass(frozen=True)
class KnowledgeRecalled:
    """The knowledge section, the warnings about matched items that are no longer facts, and the versions."""

    entries: tuple[KnowledgeEntry, ...] = ()
    warnings: tuple[str, ...] = ()
    knowledge_version: int | None = None
    truncated: bool = False


@dataclass
class _Match:
    item: KnowledgeItem
    sources: set[str] = field(default_factory=set)
    fulltext: float = 0.0
    trigram: float = 0.0
    semantic: float = 0.0


def in_scope(project_id: str | None) -> ColumnElement[bool]:
    """TENANT knowledge, and PROJECT knowledge of the request's project only (none without a project)."""
    tenant = KnowledgeItem.scope_type == ScopeType.TENANT.value
    if project_id is None:
        return tenant
    return or_(tenant, and_(KnowledgeItem.scope_type == ScopeType.PROJECT.value,
                            KnowledgeItem.project_id == project_id))


def recallable(tenant_id: str, project_id: str | None, now: datetime) -> ColumnElement[bool]:
    """The hard filters: every one holds before an item may be scored."""
    return and_(KnowledgeItem.tenant_id == tenant_id, KnowledgeItem.status == "ACTIVE",
                KnowledgeItem.authority.in_([a.value for a in RECALLED_AUTHORITIES]), in_scope(project_id),
                or_(KnowledgeItem.valid_from.is_(None), KnowledgeItem.valid_from <= now),
                or_(KnowledgeItem.valid_to.is_(None), KnowledgeItem.valid_to > now))


def _lapsed(tenant_id: str, project_id: str | None, now: datetime) -> ColumnElement[bool]:
    """Items that were facts here and are no longer: superseded, or ACTIVE past their validity."""
    return and_(KnowledgeItem.tenant_id == tenant_id,
                KnowledgeItem.authority.in_([a.value for a in RECALLED_AUTHORITIES]), in_scope(project_id),
                or_(KnowledgeItem.status == "SUPERSEDED",
                    and_(KnowledgeItem.status == "ACTIVE", KnowledgeItem.valid_to <= now)))


def _matches(session: Session, where: ColumnElement[bool], q: KnowledgeQuery) -> dict[tuple[uuid.UUID, int], _Match]:
    """Each source, capped, inside ``where``; merged per (item, version)."""
    found: dict[tuple[uuid.UUID, int], _Match] = {}

    def add(statement: Select[Any], source: str, signal: str | None) -> None:
        for row in session.execute(statement.limit(q.candidate_limit)).all():
            item: KnowledgeItem = row[0]
            match = found.setdefault((item.knowledge_id, item.version), _Match(item))
            match.sources.add(source)
            if signal is not None:
                setattr(match, signal, max(getattr(match, signal), float(row[1])))

    base = select(KnowledgeItem)
    if q.keys:
        add(base.where(where, KnowledgeItem.key.in_(list(q.keys))).order_by(KnowledgeItem.knowledge_id), "key", None)
    if q.terms:
        rank = func.ts_rank(KnowledgeItem.tokens, func.to_tsquery("simple", tsquery_any(list(q.terms))), 32)
        add(select(KnowledgeItem, rank).where(
            where, KnowledgeItem.tokens.op("@@")(func.to_tsquery("simple", tsquery_any(list(q.terms)))))
            .order_by(rank.desc(), KnowledgeItem.knowledge_id), "fulltext", "fulltext")
        normalized = normalize(q.query)
        if len(normalized) <= TRIGRAM_MAX_QUERY_CHARS:
            similarity = func.word_similarity(normalized, KnowledgeItem.search_text)
            add(select(KnowledgeItem, similarity).where(where, literal(normalized).op("<%")(KnowledgeItem.search_text))
                .order_by(similarity.desc(), KnowledgeItem.knowledge_id), "trigram", "trigram")
    if q.query_vector is not None and q.model is not None:
        dimensions = dimensions_of(q.query_vector)
        query = typed(literal(q.query_vector, Text), dimensions)
        cosine = 1 - typed(KnowledgeItem.embedding, dimensions).cosine_distance(query)
        add(select(KnowledgeItem, cosine).where(
            where, KnowledgeItem.embedding_model == q.model, of_dimensions(KnowledgeItem.embedding, dimensions))
            .order_by(cosine.desc(), KnowledgeItem.knowledge_id), "vector", "semantic")
    return found


def breakdown(m: _Match, terms: Sequence[str]) -> dict[str, float]:
    """The score, explained: relevance is the strongest signal (a key match is certain; the share of the query's
    terms the item holds; a near-spelling; a cosine above :data:`VECTOR_FLOOR`), plus the authority prior. ts_rank
    (normalised by its flag 32) is shown, and breaks ties: alone it is too small to say whether an item applies."""
    own = set(lexemes(m.item.search_text))
    coverage = sum(term in own for term in terms) / len(terms) if terms else 0.0
    semantic = max(0.0, (m.semantic - VECTOR_FLOOR) / (1 - VECTOR_FLOOR)) if "vector" in m.sources else 0.0
    relevance = max(1.0 if "key" in m.sources else 0.0, coverage, m.trigram, semantic)
    prior = AUTHORITY_PRIOR.get(m.item.authority, 0.0)
    return {"relevance": round(relevance, 6), "coverage": round(coverage, 6), "fulltext": round(m.fulltext, 6),
            "trigram": round(m.trigram, 6), "semantic": round(m.semantic, 6), "authority": prior,
            "total": round(relevance + prior + 0.01 * m.fulltext, 6)}


def entry(m: _Match, scores: Mapping[str, float]) -> KnowledgeEntry:
    item = m.item
    return KnowledgeEntry(
        knowledge_id=str(item.knowledge_id), version=item.version, key=item.key, claim=item.claim,
        authority=item.authority, scope={"type": item.scope_type, "project_id": item.project_id},
        validity={"valid_from": item.valid_from.isoformat() if item.valid_from else None,
                  "valid_to": item.valid_to.isoformat() if item.valid_to else None},
        source_refs=tuple(item.source_refs), score=scores["total"], score_breakdown=scores,
        matched_by=tuple(sorted(m.sources)),
    )


def relevant(m: _Match, scores: Mapping[str, float], q: KnowledgeQuery) -> bool:
    """A key match always is; anything else at or above the request's relevance floor."""
    return "key" in m.sources or scores["relevance"] >= q.min_relevance


def _pack(matches: Sequence[_Match], q: KnowledgeQuery) -> tuple[tuple[KnowledgeEntry, ...], bool]:
    """Best first, up to the inject limit, each claim whose tokens still fit the knowledge quota."""
    scored = sorted(((m, breakdown(m, q.terms)) for m in matches),
                    key=lambda ms: (-ms[1]["total"], str(ms[0].item.knowledge_id)))
    packed, truncated = within_budget([ms for ms in scored if relevant(*ms, q)], q.inject_limit, q.token_budget,
                                      lambda ms: ms[0].item.claim)
    return tuple(entry(*ms) for ms in packed), truncated


def lapsed_warning(session: Session, item: KnowledgeItem, now: datetime) -> str:
    """What the agent must know of a matched item that is no longer a fact: what replaced it, or when it ended."""
    name = f"knowledge {item.key or item.knowledge_id} v{item.version}"
    if item.status == "SUPERSEDED":
        successor = session.execute(select(KnowledgeItem.version, KnowledgeItem.status).where(
            KnowledgeItem.tenant_id == item.tenant_id, KnowledgeItem.knowledge_id == item.knowledge_id,
            KnowledgeItem.version > item.version).order_by(KnowledgeItem.version.desc()).limit(1)).one_or_none()
        by = f"v{successor.version} ({successor.status.lower()})" if successor is not None else "a newer version"
        return f"{name} ({item.knowledge_id}) is superseded by {by}: not a fact, do not rely on it"
    assert item.valid_to is not None and item.valid_to <= now
    return f"{name} ({item.knowledge_id}) expired at {item.valid_to.isoformat()}: not a fact, do not rely on it"


def knowledge_version(session: Session, tenant_id: str, project_id: str | None) -> int:
    """The knowledge this request could be told, as one number that grows on every change to it: the versions
    published in its scope (a publish supersedes its predecessor in the same transaction) plus the ones withdrawn.
    P3 items are not counted (never recalled); time passing a validity bound is not a change."""
    visible = and_(KnowledgeItem.tenant_id == tenant_id, in_scope(project_id),
                   KnowledgeItem.authority.in_([a.value for a in RECALLED_AUTHORITIES]))
    published, withdrawn = session.execute(
        select(func.count(), func.count().filter(KnowledgeItem.status == "WITHDRAWN")).where(visible)).one()
    return int(published) + int(withdrawn)


def recall_knowledge(session: Session, tenant_id: str, q: KnowledgeQuery, now: datetime) -> KnowledgeRecalled:
    """The bundle's knowledge section for ``q``, inside the caller's transaction (tenant RLS applies too)."""
    facts = _matches(session, recallable(tenant_id, q.project_id, now), q)
    entries, truncated = _pack(list(facts.values()), q)
    lapsed = _matches(session, _lapsed(tenant_id, q.project_id, now), q)
    warnings = tuple(lapsed_warning(session, m.item, now)
                     for _, m in sorted(lapsed.items(), key=lambda kv: (str(kv[0][0]), kv[0][1]))
                     if relevant(m, breakdown(m, q.terms), q))
    return KnowledgeRecalled(entries, warnings, knowledge_version(session, tenant_id, q.project_id), truncated)
