"""Which source holds each declared type's records: the business types are all ``resource_records``
(:class:`RecordSource`); an adapter (mnemo's memories, sessions, tasks) is registered for its own type.

Built once per process from the catalog; an adapter for a type no declaration names refuses the start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from memory.artifact_store import ArtifactStore
from memory.resources.adapters import ADAPTERS
from memory.resources.catalog import Catalog
from memory.resources.declarations import RECORDS, DeclarationError
from memory.resources.record_source import RecordSource
from memory.resources.sources import Source


@dataclass(frozen=True)
class Sources:
    by_type: Mapping[str, Source]

    def get(self, resource: str) -> Source:
        """The source of a declared type (every declared type has one, by construction)."""
        return self.by_type[resource]


def build_sources(catalog: Catalog, artifacts: ArtifactStore, adapters: Mapping[str, Source] | None = None) -> Sources:
    adapters = dict(adapters or {})
    unknown = sorted(adapters.keys() - catalog.declarations.keys())
    if unknown:
        raise DeclarationError(f"resource sources for undeclared types: {', '.join(unknown)}")
    by_type: dict[str, Source] = {
        name: adapters.get(name) or (RecordSource(declaration, artifacts) if declaration.store == RECORDS
                                     else ADAPTERS[declaration.store](declaration))
        for name, declaration in catalog.declarations.items()
    }
    return Sources(by_type)
