"""The resource reader (seed 000 §2.1): list / search / read over what one :class:`Access` allows.

Interim, in the MCP branch only: just :meth:`Reader.directory`, so the MCP endpoint can be built and tested
against the reader's interface; the reader's own branch replaces this module with the whole reader.
"""

from __future__ import annotations

from memory.resources.access import Access
from memory.resources.catalog import Catalog
from memory.resources.declarations import Operation
from memory.resources.results import Directory, DirectoryEntry


class Reader:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def directory(self, access: Access) -> Directory:
        """``list()``: the types of the access's grants, with what the caller may do and read now."""
        return Directory(
            audience=access.audience.value,
            run_id=access.run_id,
            resources=[
                DirectoryEntry(
                    type=grant.resource,
                    description=self.catalog.get(grant.resource).description,
                    operations=[operation.value for operation in Operation if operation in grant.operations],
                    fields=list(grant.fields),
                )
                for _, grant in sorted(access.grants.items())
            ],
        )
