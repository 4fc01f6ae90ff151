"""The ``knowledge`` resource: published knowledge items, named by their knowledge id (issue 27 §3).

``list`` and ``search`` show ACTIVE versions only (what is knowledge now); ``read`` by id shows the item's newest
version whatever its status, so a reader told of an item learns it was superseded or withdrawn rather than
that it never existed. A candidate is never a record of this type: it is not knowledge. Knowledge is the
tenant's, not a person's: every principal of the tenant with a grant reads it (row-level security keeps
other tenants' out, and an id of theirs reads as a missing one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Text, bindparam, cast, func, select
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.orm import Session

from memory.knowledge.models import KnowledgeItem
from memory.resources.access import Access, Grant
from memory.resources.adapters import common
from memory.resources.adapters.common import TableSource, present, stamp
from memory.resources.sources import Candidate, FilterClause, Lineage, Position, Query, SourceRow, newest_first
from memory.text import tsquery_any

KNOWLEDGE_ID = cast(KnowledgeItem.knowledge_id, Text)
COLUMNS: common.Columns = {"/authority": KnowledgeItem.authority, "/key": KnowledgeItem.key,
                    "/published_at": KnowledgeItem.published_at}
LINEAGE = Lineage(updated_at=("/published_at",), version=("/version",))
PROPOSALS = 400
"""ACTIVE items a search ranks at most (newest first): a tenant's knowledge base is curated, not a firehose."""


def data_of(item: KnowledgeItem) -> dict[str, Any]:
    """The version as the ``knowledge`` declaration names it (absent values left out)."""
    return present(
        claim=item.claim, key=item.key, authority=item.authority, status=item.status, version=item.version,
        supersedes_version=item.supersedes_version,
        scope=present(type=item.scope_type, project_id=item.project_id),
        validity=present(valid_from=stamp(item.valid_from), valid_to=stamp(item.valid_to)),
        source_refs=list(item.source_refs), withdrawn_reason=item.withdrawn_reason,
        published_at=stamp(item.published_at),
    )


def _active(access: Access) -> Any:
    return (KnowledgeItem.tenant_id == access.principal.tenant_id) & (KnowledgeItem.status == "ACTIVE")


@dataclass
class KnowledgeSource(TableSource):
    columns = COLUMNS

    def page(self, session: Session, access: Access, grant: Grant, filters: Sequence[FilterClause],
             after: Position | None, limit: int) -> list[SourceRow]:
        active = select(KnowledgeItem).where(_active(access), *common.filter_conditions(self.columns, filters))
        statement = newest_first(active, KnowledgeItem.published_at, KNOWLEDGE_ID, after, limit, grant=grant,
                                 lineage=LINEAGE)
        return [self._row(item) for item in session.execute(statement).scalars()]

    def match(self, session: Session, access: Access, grant: Grant, query: Query, limit: int) -> list[Candidate]:
        """The index proposes ACTIVE items with a query word; the readable fields alone decide (common.match_rows)."""
        if not query.terms:
            return []
        proposals = session.execute(
            select(KnowledgeItem).where(
                _active(access), KnowledgeItem.tokens.op("@@")(func.to_tsquery("simple", bindparam("q", type_=Text))))
            .order_by(KnowledgeItem.published_at.desc(), KnowledgeItem.knowledge_id).limit(PROPOSALS),
            {"q": tsquery_any(list(query.terms))}).scalars()
        rows = [(str(item.knowledge_id), data_of(item)) for item in proposals]
        return common.match_rows(session, self.declaration, grant, query.terms, rows, limit)

    def fetch(self, session: Session, access: Access, grant: Grant, ids: Sequence[str], *,
              whole: bool = False) -> Mapping[str, SourceRow]:
        del grant, whole  # an item has no long field
        parsed = [knowledge_id for knowledge_id in map(common.uuid_or_none, ids) if knowledge_id is not None]
        if not parsed:
            return {}
        newest = (select(KnowledgeItem)
                  .where(KnowledgeItem.tenant_id == access.principal.tenant_id, KnowledgeItem.knowledge_id.in_(parsed))
                  .ext(distinct_on(KnowledgeItem.knowledge_id))
                  .order_by(KnowledgeItem.knowledge_id, KnowledgeItem.version.desc()))
        return {str(item.knowledge_id): self._row(item) for item in session.execute(newest).scalars()}

    def _row(self, item: KnowledgeItem) -> SourceRow:
        return SourceRow(resource=self.resource, record_id=str(item.knowledge_id), version=item.version,
                         updated_at=item.published_at, data=data_of(item), lineage=LINEAGE)
