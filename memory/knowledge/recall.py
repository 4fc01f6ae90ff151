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

from sqlalchemy import ColumnElement, Select, Text, and_, func, literal, or_, select, tuple_, union_all
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
    item: Any
    """A row of :data:`READ`: the item's columns ranking, the entry and a warning need."""
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


def _branches(where: ColumnElement[bool], fact: ColumnElement[bool], q: KnowledgeQuery) -> list[Select[Any]]:
    """One capped statement per source (key, full text, trigram, vector), each naming (item, version, source,
    signal). Facts come first in each, so items that are no longer facts never crowd one out of the cap."""
    ident = (KnowledgeItem.knowledge_id, KnowledgeItem.version)
    branches: list[Select[Any]] = []

    def branch(source: str, signal: ColumnElement[Any], *conditions: ColumnElement[bool]) -> None:
        branches.append(select(*ident, literal(source).label("source"), signal.label("signal"))
                        .where(where, *conditions)
                        .order_by(fact.desc(), signal.desc(), KnowledgeItem.knowledge_id, KnowledgeItem.version)
                        .limit(q.candidate_limit))

    if q.keys:
        branch("key", literal(1.0), KnowledgeItem.key.in_(list(q.keys)))
    if q.terms:
        tsquery = func.to_tsquery("simple", tsquery_any(list(q.terms)))
        branch("fulltext", func.ts_rank(KnowledgeItem.tokens, tsquery, 32), KnowledgeItem.tokens.op("@@")(tsquery))
        normalized = normalize(q.query)
        if len(normalized) <= TRIGRAM_MAX_QUERY_CHARS:
            branch("trigram", func.word_similarity(normalized, KnowledgeItem.search_text),
                   literal(normalized).op("<%")(KnowledgeItem.search_text))
    if q.query_vector is not None and q.model is not None:
        dimensions = dimensions_of(q.query_vector)
        query = typed(literal(q.query_vector, Text), dimensions)
        branch("vector", 1 - typed(KnowledgeItem.embedding, dimensions).cosine_distance(query),
               KnowledgeItem.embedding_model == q.model, of_dimensions(KnowledgeItem.embedding, dimensions))
    return branches


READ = (KnowledgeItem.tenant_id, KnowledgeItem.knowledge_id, KnowledgeItem.version, KnowledgeItem.status,
        KnowledgeItem.key, KnowledgeItem.claim, KnowledgeItem.authority, KnowledgeItem.scope_type,
        KnowledgeItem.project_id, KnowledgeItem.source_refs, KnowledgeItem.valid_from, KnowledgeItem.valid_to,
        KnowledgeItem.search_text)
"""What ranking, the entry and a warning read of an item: never its vector nor its tsvector (the heavy columns)."""


def _matches(session: Session, tenant_id: str, q: KnowledgeQuery, now: datetime,
             ) -> tuple[list[_Match], list[_Match]]:
    """The facts and the lapsed items the sources find, in one round trip for the sources and one for the rows.

    The hard filters are in the statements' ``where``: a fact passes :func:`recallable`, a lapsed item
    :func:`_lapsed`; nothing else is read."""
    fact = recallable(tenant_id, q.project_id, now)
    branches = _branches(or_(fact, _lapsed(tenant_id, q.project_id, now)), fact, q)
    if not branches:
        return [], []
    found: dict[tuple[uuid.UUID, int], dict[str, float]] = {}
    for knowledge_id, version, source, signal in session.execute(union_all(*branches)).all():
        found.setdefault((knowledge_id, version), {})[source] = float(signal)
    if not found:
        return [], []
    rows = session.execute(
        select(*READ, fact.label("fact")).where(
            KnowledgeItem.tenant_id == tenant_id,
            tuple_(KnowledgeItem.knowledge_id, KnowledgeItem.version).in_(sorted(found)))).all()
    facts: list[_Match] = []
    lapsed: list[_Match] = []
    for row in rows:
        signals = found[(row.knowledge_id, row.version)]
        match = _Match(row, set(signals), fulltext=signals.get("fulltext", 0.0),
                       trigram=signals.get("trigram", 0.0), semantic=signals.get("vector", 0.0))
        (facts if row.fact else lapsed).append(match)
    return facts, lapsed


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


def lapsed_warnings(session: Session, tenant_id: str, lapsed: Sequence[_Match], now: datetime) -> tuple[str, ...]:
    """What the agent must know of each matched item that is no longer a fact: what replaced it, or when it ended
    (the newest version of every superseded item, in one statement)."""
    superseded = sorted({m.item.knowledge_id for m in lapsed if m.item.status == "SUPERSEDED"})
    newest: dict[uuid.UUID, tuple[int, str]] = {}
    if superseded:
        for knowledge_id, version, status in session.execute(
                select(KnowledgeItem.knowledge_id, KnowledgeItem.version, KnowledgeItem.status)
                .where(KnowledgeItem.tenant_id == tenant_id, KnowledgeItem.knowledge_id.in_(superseded))).all():
            if version > newest.get(knowledge_id, (0, ""))[0]:
                newest[knowledge_id] = (version, status)
    warnings: list[str] = []
    for m in sorted(lapsed, key=lambda m: (str(m.item.knowledge_id), m.item.version)):
        item = m.item
        name = f"knowledge {item.key or item.knowledge_id} v{item.version}"
        if item.status == "SUPERSEDED":
            successor = newest.get(item.knowledge_id)
            by = f"v{successor[0]} ({successor[1].lower()})" if successor and successor[0] > item.version \
                else "a newer version"
            warnings.append(f"{name} ({item.knowledge_id}) is superseded by {by}: not a fact, do not rely on it")
        else:
            assert item.valid_to is not None and item.valid_to <= now
            warnings.append(f"{name} ({item.knowledge_id}) expired at {item.valid_to.isoformat()}: not a fact, do "
                            "not rely on it")
    return tuple(warnings)


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
    facts, lapsed = _matches(session, tenant_id, q, now)
    entries, truncated = _pack(facts, q)
    warned = [m for m in lapsed if relevant(m, breakdown(m, q.terms), q)]
    return KnowledgeRecalled(entries, lapsed_warnings(session, tenant_id, warned, now),
                             knowledge_version(session, tenant_id, q.project_id), truncated)
