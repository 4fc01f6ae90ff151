"""The resource reader (seed 000 §2.1): list / search / read over every declared type, for REST and MCP alike.

Built once per process (:meth:`Reader.build`, stored on ``app.state.reader``). Each call takes the
request's :class:`Access`, computed afresh for it (a revoked field or type applies to the very next
page), and answers one of the shared result models (:mod:`memory.resources.results`), always within
65,536 bytes as :func:`memory.resources.pages.encode` writes it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine

from memory import offload
from memory.artifact_store import ArtifactStore
from memory.db import tenant_session
from memory.errors import InvalidInput, NotFound
from memory.resources.access import Access
from memory.resources.catalog import Catalog
from memory.resources.cursors import Binding, CursorInvalid, CursorKeys, SourceChanged, issue, redeem
from memory.resources.declarations import RECORD_ID, TYPE_NAME, Operation
from memory.resources.derived import shown
from memory.resources.listing import list_page
from memory.resources.pages import read_page
from memory.resources.registry import Sources, build_sources
from memory.resources.results import Directory, DirectoryEntry, ListPage, ReadPage, SearchResult
from memory.resources.search import DEFAULT_TOP_K, MAX_TOP_K, OFFLOAD_FROM_TERMS, parse_query, search
from memory.resources.sources import Source

REF = re.compile(rf"({TYPE_NAME.pattern}):({RECORD_ID})")


def parse_ref(ref: str) -> tuple[str, str]:
    found = REF.fullmatch(ref)
    if found is None:
        raise InvalidInput(f"{ref[:200]!r} is not a ref: refs are `<type>:<id>`, as search and list return them",
                           code="invalid_ref")
    return found.group(1), found.group(2)


@dataclass(frozen=True)
class Reader:
    engine: Engine
    catalog: Catalog
    sources: Sources
    keys: CursorKeys

    @classmethod
    def build(cls, engine: Engine, catalog: Catalog, artifacts: ArtifactStore, keys: CursorKeys,
              adapters: Mapping[str, Source] | None = None) -> Reader:
        return cls(engine, catalog, build_sources(catalog, artifacts, adapters), keys)

    def directory(self, access: Access) -> Directory:
        """The types the caller may use now, with its operations and readable fields on each."""
        return Directory(audience=access.audience.value, run_id=access.run_id, resources=[
            DirectoryEntry(type=name, description=self.catalog.get(name).description,
                           operations=[op.value for op in Operation if op in grant.operations],
                           fields=list(grant.fields))
            for name, grant in sorted(access.grants.items())
        ])

    def list(self, access: Access, resource: str, filters: Mapping[str, str], cursor: str | None) -> ListPage:
        access.grant(resource, Operation.LIST)  # first: an unusable type is the 404 of an undeclared one
        declaration = self.catalog.get(resource)
        with tenant_session(self.engine, access.principal.tenant_id) as session:
            return list_page(session, access, declaration, self.sources.get(resource), filters, cursor, self.keys)

    def search(self, access: Access, query: str, resource: str | None, top_k: int | None) -> SearchResult:
        top_k = DEFAULT_TOP_K if top_k is None else top_k
        if not 1 <= top_k <= MAX_TOP_K:
            raise InvalidInput(f"top_k is 1 to {MAX_TOP_K}", code="invalid_top_k")
        return offload.in_tenant(self.engine, access.principal.tenant_id, search, access, self.catalog, self.sources,
                                 query, resource, top_k, datetime.now(UTC),
                                 inline=len(parse_query(query).terms) < OFFLOAD_FROM_TERMS)

    def read(self, access: Access, ref: str, cursor: str | None) -> ReadPage:
        """The readable fields of one record: whole when they fit a page, else fragments page by page."""
        resource, record_id = parse_ref(ref)
        grant = access.grant(resource, Operation.READ)
        binding = Binding(Operation.READ, resource, ref, {})
        start, mark = None, None
        if cursor is not None:
            position, mark = redeem(self.keys, cursor, access, grant, binding)
            if not isinstance(position, int) or isinstance(position, bool) or position < 1 or mark is None:
                raise CursorInvalid("the cursor cannot be read")
            start = position
        with tenant_session(self.engine, access.principal.tenant_id) as session:
            row = self.sources.get(resource).fetch(session, access, grant, [record_id], whole=True).get(record_id)
        if row is None:
            raise NotFound(f"no record {ref}")
        seen = shown(row, grant)
        if mark is not None and seen.mark() != mark:
            raise SourceChanged(f"{ref} changed since this cursor was issued: read it again from the start",
                                details={"current_version": seen.version})
        return read_page(ref, seen.version, seen.data, start,
                         lambda position: issue(self.keys, access, grant, binding, position, seen.mark()))
