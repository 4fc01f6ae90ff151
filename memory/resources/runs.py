"""Runs and the access a request is given (seed 000 §3.1).

Interim: only a key's own audience ceiling, no runs and no policies yet (issue 15's runs slice replaces
the body of :func:`resolve_access`; its signature is the contract the reader and the routes build on).
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from memory.auth import PrincipalContext
from memory.errors import InvalidInput
from memory.resources.access import Access, ceiling_grant
from memory.resources.catalog import Catalog, audience_of


def resolve_access(session: Session, principal: PrincipalContext, catalog: Catalog, *, run_id: str | None,
                   thread_id: str | None) -> Access:
    """The access of one request: the run's snapshot ∩ the current policy ∩ the audience's ceiling.

    Raises a typed error (never an empty access) when the run is missing, ended, foreign or of another
    thread, or when the policy store cannot be read.
    """
    del session
    if run_id is not None or thread_id is not None:
        raise InvalidInput("runs are not registered yet", code="runs_not_supported")
    audience = audience_of(principal)
    grants = {}
    for declaration in catalog.visible_to(audience):
        grant = ceiling_grant(declaration, audience)
        if grant is not None:
            grants[declaration.type] = grant
    return Access(principal=principal, audience=audience, agent_id=principal.agent_id, run_id=None, grants=grants)
