"""What the adapters of mnemo's own objects share: a ``list``'s typed filters as SQL on
their columns, and a ``search``'s lexical match over the readable fields' text.

None of mnemo's own objects has a per-field search projection (the memories' one mixes their fields), so
:func:`match_rows` tokenises each readable field as the record projection does (:func:`memory.text.lexemes`
then ``to_tsvector('simple', ...)``, via :func:`memory.resources.projection.field_texts`) and lets
PostgreSQL decide the match, the rank and the coverage exactly as :class:`RecordSource` does: a word only
in a field the grant does not read never makes a candidate, and the ranker compares like with like.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import ColumnElement, SQLColumnExpression, text
from sqlalchemy.orm import Session

from memory.resources.access import Grant
from memory.resources.declarations import Declaration, DeclarationError
from memory.resources.projection import field_texts
from memory.resources.sources import Candidate, FilterClause, FilterOp
from memory.text import lexemes, tsquery_any

Columns = Mapping[str, SQLColumnExpression[Any]]
"""Declared field path → the SQL expression holding the value the adapter returns at that path."""


@dataclass
class TableSource:
    """What every adapter is built from: its type's declaration, and (per subclass) the columns its declared
    filters compare — checked once, at start-up, so a filter without a column refuses the start."""

    declaration: Declaration
    columns: ClassVar[Columns]
    resource: str = field(init=False)

    def __post_init__(self) -> None:
        self.resource = self.declaration.type
        check_filter_columns(self.declaration, self.columns)


def check_filter_columns(declaration: Declaration, columns: Columns) -> None:
    """Refuse the start when a declared filter has no column here: a filter the adapter cannot apply."""
    missing = sorted(f.path for f in declaration.filters.values() if f.path not in columns)
    if missing:
        raise DeclarationError(
            f"resource declaration {declaration.type!r} ({declaration.source}): store {declaration.store!r} cannot"
            f" filter on {missing}"
        )


def filter_conditions(columns: Columns, clauses: Sequence[FilterClause]) -> list[ColumnElement[bool]]:
    """Each clause as a condition on its column (a row without the value never passes)."""
    conditions: list[ColumnElement[bool]] = []
    for clause in clauses:
        column = columns[clause.filter.path]
        if clause.op is FilterOp.EQUALS:
            conditions.append(column == clause.value)
        elif clause.op is FilterOp.FROM:
            conditions.append(column >= clause.value)
        else:
            conditions.append(column < clause.value)
    return conditions


_MATCH = text("""
    WITH query AS (SELECT to_tsquery('simple', :tsquery) AS q),
         query_lexemes AS (SELECT unnest(tsvector_to_array(to_tsvector('simple', :lexemes))) AS lexeme),
         docs AS (SELECT place, to_tsvector('simple', doc) AS tokens
                  FROM unnest(CAST(:docs AS text[])) WITH ORDINALITY AS d(doc, place))
    SELECT docs.place, ts_rank(docs.tokens, query.q) AS rank,
           ARRAY(SELECT q.lexeme FROM query_lexemes q JOIN unnest(docs.tokens) u ON u.lexeme = q.lexeme) AS found,
           (SELECT count(*) FROM query_lexemes) AS total
    FROM docs, query
    WHERE docs.tokens @@ query.q
""")


def match_rows(session: Session, declaration: Declaration, grant: Grant, terms: Sequence[str],
               rows: Iterable[tuple[str, dict[str, Any]]], limit: int) -> list[Candidate]:
    """The best ``limit`` of ``rows`` (record id, its data) by the query ``terms``, matched in readable search fields
    only: most query lexemes found first, then ``ts_rank`` summed over the matched fields, then id."""
    readable = [path for path in declaration.search_fields if grant.reads(path)]
    if not readable or not terms:
        return []
    docs: list[tuple[str, str]] = []
    lexeme_texts: list[str] = []
    for record_id, data in rows:
        for path, value in field_texts(declaration, data).items():
            if path in readable:
                docs.append((record_id, path))
                lexeme_texts.append(" ".join(lexemes(value)))
    if not docs:
        return []
    found: dict[str, set[str]] = {}
    rank: dict[str, float] = {}
    fields: dict[str, list[str]] = {}
    total = 1
    hits = session.execute(_MATCH, {"tsquery": tsquery_any(list(terms)), "lexemes": " ".join(terms),
                                    "docs": lexeme_texts})
    for hit in hits:
        record_id, path = docs[hit.place - 1]
        found.setdefault(record_id, set()).update(hit.found)
        rank[record_id] = rank.get(record_id, 0.0) + float(hit.rank)
        fields.setdefault(record_id, []).append(path)
        total = max(1, int(hit.total))
    order = {path: place for place, path in enumerate(declaration.search_fields)}
    best = sorted(found, key=lambda record_id: (-len(found[record_id]), -rank[record_id], record_id))[:limit]
    return [
        Candidate(record_id=record_id, coverage=min(1.0, len(found[record_id]) / total),
                  rank=rank[record_id] / (rank[record_id] + 1.0),
                  fields=tuple(sorted(fields[record_id], key=order.__getitem__)))
        for record_id in best
    ]


def uuid_or_none(raw: str) -> uuid.UUID | None:
    """An id of a row keyed by a UUID, or None for text that is none (it names no row, like a missing one)."""
    try:
        return uuid.UUID(raw)
    except ValueError:
        return None


def present(**values: Any) -> dict[str, Any]:
    """``values`` without the absent ones: a declared field is never null (declarations refuse null types)."""
    return {name: value for name, value in values.items() if value is not None}


def stamp(value: datetime | None) -> str | None:
    """A timestamp as the declarations' ``date-time`` strings are written (ISO 8601 with its offset)."""
    return None if value is None else value.isoformat()
