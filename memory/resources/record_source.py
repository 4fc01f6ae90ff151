"""The source of the business types (episode, todo, transcript, ...): ``resource_records`` and its search projection.

Every statement names the caller's tenant and user and excludes what a deletion barrier covers
(:func:`memory.resources.records.not_forgotten`), so another user's, another tenant's or a forgotten
record is as absent as one never written. A search matches the projection rows of readable declared
fields only (:meth:`RecordSource.match`); what a record *is* now comes from its row (:meth:`RecordSource.fetch`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ARRAY,
    TIMESTAMP,
    ColumnElement,
    Numeric,
    Text,
    and_,
    bindparam,
    cast,
    func,
    select,
    true,
)
from sqlalchemy.dialects.postgresql import JSONB, aggregate_order_by
from sqlalchemy.orm import Session

from memory.artifact_store import ArtifactStore
from memory.errors import InvalidInput
from memory.resources import pointers
from memory.resources.access import Access, Grant
from memory.resources.bodies import Offloaded, record_store, restore
from memory.resources.declarations import Declaration, FilterType
from memory.resources.models import ResourceArtifact, ResourceRecord, ResourceSearch
from memory.resources.records import not_forgotten
from memory.resources.sources import (
    Candidate,
    FilterClause,
    FilterOp,
    Lineage,
    Position,
    Query,
    RowState,
    SourceRow,
    newest_first,
)
from memory.text import tsquery_any

STATES: dict[str, tuple[str, frozenset[str], frozenset[str]]] = {
    "todo": ("/status", frozenset({"open"}), frozenset({"done", "cancelled"})),
    "intent": ("/status", frozenset({"proposed"}), frozenset({"confirmed", "rejected", "executed"})),
    "calendar": ("/status", frozenset(), frozenset({"cancelled"})),
}
"""Per type with a lifecycle: the field holding it, its open values and its closed ones (any other: no state).
Open is "still to act on" (a todo to do, an intent to confirm); a confirmed event is not work left, so it has
no state and does not outrank the meeting's episode, but a cancelled one is history."""


def lineage_of(declaration: Declaration) -> Lineage:
    """A record's state comes from its status field. Its version and time of change are the store's, but a write of
    ANY field moves them: a caller who may not read every field would see a withheld field change (a todo's title
    unchanged at version 2: its status moved), so they come from every field of the type."""
    spec = STATES.get(declaration.type)
    every = tuple(f"/{pointers.escape(name)}" for name in declaration.schema.get("properties", {}))
    return Lineage(state=(spec[0],) if spec is not None else (), updated_at=every, version=every)


def state_of(resource: str, data: dict[str, Any]) -> RowState:
    spec = STATES.get(resource)
    if spec is None:
        return RowState.NONE
    path, open_values, closed_values = spec
    value = next((found for _, found in pointers.values_at(data, path)), None)
    if value in open_values:
        return RowState.OPEN
    if value in closed_values:
        return RowState.CLOSED
    return RowState.NONE


@dataclass(frozen=True)
class RecordSource:
    """One business type's records; ``artifacts`` is the artifact store its long fields are read from."""

    declaration: Declaration
    artifacts: ArtifactStore

    @property
    def resource(self) -> str:
        return self.declaration.type

    def _own(self, access: Access) -> ColumnElement[bool]:
        return and_(ResourceRecord.tenant_id == access.principal.tenant_id,
                    ResourceRecord.owner_id == access.principal.user_id,
                    ResourceRecord.resource == self.resource, not_forgotten())

    def page(self, session: Session, access: Access, grant: Grant, filters: Sequence[FilterClause],
             after: Position | None, limit: int) -> list[SourceRow]:
        # Filters were checked against the grant by the reader; a source answers rows, whole.
        statement = newest_first(select(ResourceRecord).where(self._own(access), *map(_condition, filters)),
                                 ResourceRecord.updated_at, ResourceRecord.record_id, after, limit,
                                 grant=grant, lineage=lineage_of(self.declaration))
        records = session.execute(statement).scalars().all()
        offloaded = self._offloaded(session, access, [record.record_id for record in records])
        return [self._row(record, record.data, tuple(body.path for body in offloaded[record.record_id]))
                for record in records]

    def match(self, session: Session, access: Access, grant: Grant, query: Query, limit: int) -> list[Candidate]:
        readable = [path for path in self.declaration.search_fields if grant.reads(path)]
        if not readable or not query.terms:
            return []
        tsquery = func.to_tsquery("simple", bindparam("tsquery", type_=Text))
        query_lexemes = select(func.unnest(func.tsvector_to_array(
            func.to_tsvector("simple", bindparam("lexemes", type_=Text)))).label("lexeme")).subquery("query_lexemes")
        rank = func.ts_rank(ResourceSearch.tokens, tsquery)
        hits = (
            select(ResourceSearch.record_id, ResourceSearch.field_path, ResourceSearch.tokens, rank.label("rank"))
            .join(ResourceRecord, and_(*(getattr(ResourceRecord, column) == getattr(ResourceSearch, column)
                                         for column in ("tenant_id", "owner_id", "resource", "record_id"))))
            .where(self._own(access), ResourceSearch.field_path.in_(readable), ResourceSearch.tokens.op("@@")(tsquery))
            .cte("hits").prefix_with("MATERIALIZED")  # read (and ranked) once, not once per use
        )
        # A hit's lexemes, hash-joined with the query's: comparing each query lexeme with ANY(array of the hit's
        # lexemes) was hits × query lexemes × field length, 1.6 s of PostgreSQL's CPU for a 1,000-character CJK
        # query over 300 todos (issue 23, finding 7: the search flood).
        lexeme = func.unnest(hits.c.tokens).table_valued("lexeme", "positions", "weights").lateral("hit_lexemes")
        found = (
            select(hits.c.record_id, func.count(func.distinct(query_lexemes.c.lexeme)).label("found"))
            .select_from(hits)
            .join(lexeme, true())
            .join(query_lexemes, query_lexemes.c.lexeme == lexeme.c.lexeme)
            .group_by(hits.c.record_id)
            .subquery("found")
        )
        total = select(func.count()).select_from(query_lexemes).scalar_subquery()
        matched = func.coalesce(func.max(found.c.found), 0)
        statement = (
            select(hits.c.record_id, (matched * 1.0 / func.greatest(total, 1)).label("coverage"),
                   func.sum(hits.c.rank).label("rank"),
                   func.array_agg(aggregate_order_by(hits.c.field_path, hits.c.rank.desc())).label("fields"))
            .select_from(hits)
            .outerjoin(found, found.c.record_id == hits.c.record_id)
            .group_by(hits.c.record_id)
            .order_by(matched.desc(), func.sum(hits.c.rank).desc(), hits.c.record_id)
            .limit(limit)
        )
        rows = session.execute(statement, {"tsquery": tsquery_any(list(query.terms)),
                                           "lexemes": " ".join(query.terms)}).all()
        return [
            Candidate(record_id=row.record_id, coverage=min(1.0, float(row.coverage)),
                      rank=float(row.rank) / (float(row.rank) + 1.0), fields=tuple(row.fields))
            for row in rows
        ]

    def fetch(self, session: Session, access: Access, grant: Grant, ids: Sequence[str], *,
              whole: bool = False) -> Mapping[str, SourceRow]:
        if not ids:
            return {}
        records = session.execute(
            select(ResourceRecord).where(self._own(access), ResourceRecord.record_id.in_(list(ids)))
        ).scalars().all()
        offloaded = self._offloaded(session, access, [record.record_id for record in records])
        store = record_store(self.artifacts, access.principal.tenant_id)
        rows: dict[str, SourceRow] = {}
        for record in records:
            bodies = offloaded[record.record_id]
            if whole:  # the bodies the grant reads; one it does not is never read from the store
                wanted = [body for body in bodies if grant.reads(body.path)]
                rows[record.record_id] = self._row(record, restore(store, record.data, wanted),
                                                   tuple(body.path for body in bodies if body not in wanted))
            else:
                rows[record.record_id] = self._row(record, record.data, tuple(body.path for body in bodies))
        return rows

    def _offloaded(self, session: Session, access: Access, ids: list[str]) -> dict[str, list[Offloaded]]:
        """Per record, its long fields held in the artifact store (absent from its inline data)."""
        offloaded: dict[str, list[Offloaded]] = {record_id: [] for record_id in ids}
        if not ids:
            return offloaded
        artifacts = session.execute(
            select(ResourceArtifact)
            .where(ResourceArtifact.tenant_id == access.principal.tenant_id,
                   ResourceArtifact.owner_id == access.principal.user_id,
                   ResourceArtifact.resource == self.resource, ResourceArtifact.record_id.in_(ids))
            .order_by(ResourceArtifact.record_id, ResourceArtifact.field_path)
        ).scalars()
        for artifact in artifacts:
            offloaded[artifact.record_id].append(
                Offloaded(artifact.field_path, artifact.sha256, artifact.size_bytes, artifact.characters))
        return offloaded

    def _row(self, record: ResourceRecord, data: dict[str, Any], long_fields: tuple[str, ...]) -> SourceRow:
        return SourceRow(resource=self.resource, record_id=record.record_id, version=record.version,
                         updated_at=record.updated_at, data=data, long_fields=long_fields,
                         state=state_of(self.resource, data), lineage=lineage_of(self.declaration))


def _condition(clause: FilterClause) -> ColumnElement[bool]:
    """A clause as SQL on ``data``: equality by JSON containment (so ``*`` means any item), ranges by a cast of the
    value at the path (a record without the field never passes a range)."""
    kind, path, value = clause.filter.type, clause.filter.path, clause.value
    tokens = pointers.parse(path)
    if clause.op is FilterOp.EQUALS and kind is not FilterType.TIMESTAMP:
        document = _containing(tokens, value.isoformat() if isinstance(value, datetime) else value)
        return ResourceRecord.data.op("@>")(cast(document, JSONB))
    if pointers.WILDCARD in tokens:
        raise InvalidInput(f"filter {clause.filter.name!r} is on an array field: it compares only equal strings,"
                           " refs, booleans and numbers", code="filter_not_supported")
    text = ResourceRecord.data.op("#>>")(cast(list(tokens), ARRAY(Text)))
    column: ColumnElement[Any] = cast(text, TIMESTAMP(timezone=True) if kind is FilterType.TIMESTAMP else Numeric)
    if clause.op is FilterOp.EQUALS:  # an instant, whatever offset either side was written with
        return column == value
    return column >= value if clause.op is FilterOp.FROM else column < value


def _containing(tokens: tuple[str, ...], value: Any) -> Any:
    """The smallest document containing ``value`` at ``tokens`` (``*``: inside some item of an array)."""
    if not tokens:
        return value
    head, rest = tokens[0], tokens[1:]
    inner = _containing(rest, value)
    return [inner] if head == pointers.WILDCARD else {head: inner}
