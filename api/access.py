"""The access of a request to the resources (:mod:`memory.resources.access`), as a FastAPI dependency.

The run is named by the ``X-Mnemo-Run`` header (and, optionally, its thread by ``X-Mnemo-Thread``); who
reads comes from the API key, never from a body or a tool argument.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header

from api.deps import CatalogDep, CurrentPrincipal, EngineDep
from memory.resources.access import Access
from memory.resources.runs import access_for

RUN_HEADER = "X-Mnemo-Run"
THREAD_HEADER = "X-Mnemo-Thread"


def read_access(
    principal: CurrentPrincipal, engine: EngineDep, catalog: CatalogDep,
    run: Annotated[str | None, Header(alias=RUN_HEADER, description="The run this request reads for (its run_id)",
                                      json_schema_extra={"format": "uuid"})] = None,
    thread: Annotated[str | None, Header(alias=THREAD_HEADER, description="The run's thread, checked")] = None,
) -> Access:
    """Computed for every request (a revocation applies to the very next one), in a transaction of its own."""
    return access_for(engine, principal, catalog, run_id=run, thread_id=thread)


ReadAccess = Annotated[Access, Depends(read_access)]
