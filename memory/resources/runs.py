"""Runs and the access a request is given (seed 000 §3.1).

A trusted runtime (a key holding ``agent_runtime``) registers a run of an agent for its user and freezes the
run's snapshot: the agent's current policy ∩ the audience's ceiling. Every request naming the run gets the
snapshot ∩ the agent's policy *now* ∩ the ceiling, so an admin's revocation applies to the very next request
and a grant added after the run started never widens it. A request naming no run reads under its key's agent's
current policy (none: a user's own key, the ceiling alone). A policy store that cannot be read is a 503
``policy_unavailable``, never an empty access.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from memory.db import tenant_session
from memory.enums import Role
from memory.errors import Forbidden, InvalidInput, MnemoError, NotFound
from memory.identity.auth import PrincipalContext
from memory.resources.access import Access, Grant, ceiling_grant, narrow
from memory.resources.agent_policies import check_agent_id, current_policies
from memory.resources.catalog import Catalog, audience_of
from memory.resources.declarations import Audience, Operation
from memory.resources.run_models import ResourceRun

RETRY_AFTER_SECONDS = 5


class PolicyUnavailable(MnemoError):
    """The runs or policies could not be read: nothing may be read until they can (never an empty access)."""

    code = "policy_unavailable"
    http_status = 503


@dataclass(frozen=True)
class Run:
    run_id: uuid.UUID
    user_id: str
    agent_id: str
    thread_id: str
    snapshot: dict[str, Grant]
    """The access frozen when the run started, by resource type."""
    registered_by: str
    started_at: datetime
    ended_at: datetime | None


@contextmanager
def _policy_store(doing: str) -> Iterator[None]:
    """A database error while reading runs or policies is a refusal saying so, not a 500 or an empty access."""
    try:
        yield
    except DBAPIError as exc:
        raise PolicyUnavailable(
            f"the authorization store could not be read while {doing}, so nothing may be read now; retry shortly",
            details={"retry_after_seconds": RETRY_AFTER_SECONDS},
        ) from exc


def _encode(snapshot: dict[str, Grant]) -> dict[str, Any]:
    return {resource: {"operations": sorted(op.value for op in grant.operations), "fields": list(grant.fields)}
            for resource, grant in snapshot.items()}


def _decode(stored: dict[str, Any]) -> dict[str, Grant]:
    return {resource: Grant(resource, frozenset(Operation(op) for op in entry["operations"]), tuple(entry["fields"]))
            for resource, entry in stored.items()}


def _run_of(row: ResourceRun) -> Run:
    return Run(run_id=row.run_id, user_id=row.user_id, agent_id=row.agent_id, thread_id=row.thread_id,
               snapshot=_decode(row.snapshot), registered_by=row.registered_by, started_at=row.started_at,
               ended_at=row.ended_at)


def _ceilings(catalog: Catalog, audience: Audience) -> dict[str, Grant]:
    found = {declaration.type: ceiling_grant(declaration, audience) for declaration in catalog.visible_to(audience)}
    return {resource: grant for resource, grant in found.items() if grant is not None}


def _narrowed(ceilings: dict[str, Grant], *limits: dict[str, Grant]) -> dict[str, Grant]:
    """Per type, the ceiling ∩ each limit; a type a limit does not name, or left with nothing, is absent."""
    grants = {resource: narrow(ceiling, *(limit.get(resource) for limit in limits))
              for resource, ceiling in ceilings.items()}
    return {resource: grant for resource, grant in grants.items() if grant is not None}


def _is_runtime(principal: PrincipalContext) -> bool:
    """Checked by name, as :func:`memory.resources.catalog.audience_of` does: an admin holds every role but is
    a person, not the runtime, and is not made to name a run."""
    return Role.AGENT_RUNTIME.value in principal.roles and Role.ADMIN.value not in principal.roles


def reads_under_policy(principal: PrincipalContext) -> bool:
    """Whether the key reads as an agent (bound to one, or the runtime's): always under an agent's policy."""
    return principal.agent_id is not None or _is_runtime(principal)


def _own_run(session: Session, principal: PrincipalContext, run_id: uuid.UUID, *, lock: bool = False) -> ResourceRun:
    """The run if it reads for the caller's user; another tenant's or user's is the 404 of a missing one."""
    query = select(ResourceRun).where(ResourceRun.tenant_id == principal.tenant_id, ResourceRun.run_id == run_id,
                                      ResourceRun.user_id == principal.user_id)
    row = session.execute(query.with_for_update() if lock else query).scalar_one_or_none()
    if row is None:
        raise NotFound(f"run {run_id} does not exist", code="run_not_found")
    return row


def register_run(session: Session, principal: PrincipalContext, catalog: Catalog, thread_id: str,
                 agent_id: str) -> Run:
    """The trusted runtime starts a run of ``agent_id`` for its key's user, freezing the agent's access now."""
    if not principal.has(Role.AGENT_RUNTIME):
        raise Forbidden("registering a run needs the agent_runtime role")
    check_agent_id(agent_id)
    if principal.agent_id is not None and principal.agent_id != agent_id:
        raise Forbidden(f"this key runs agent {principal.agent_id}; it cannot register a run of {agent_id}",
                        code="agent_mismatch")
    with _policy_store("registering the run"):
        policies = current_policies(session, principal.tenant_id, agent_id)
    snapshot = _narrowed(_ceilings(catalog, audience_of(principal)), policies)
    row = ResourceRun(tenant_id=principal.tenant_id, run_id=uuid.uuid4(), user_id=principal.user_id,
                      agent_id=agent_id, thread_id=thread_id, snapshot=_encode(snapshot),
                      registered_by=principal.key_id)
    session.add(row)
    session.flush()
    session.refresh(row)
    return _run_of(row)


def get_run(session: Session, principal: PrincipalContext, run_id: uuid.UUID) -> Run:
    """A run of the caller's user."""
    return _run_of(_own_run(session, principal, run_id))


def end_run(session: Session, principal: PrincipalContext, run_id: uuid.UUID) -> Run:
    """The runtime ends a run: every later request naming it is refused. Ending it again changes nothing."""
    if not principal.has(Role.AGENT_RUNTIME):
        raise Forbidden("ending a run needs the agent_runtime role")
    row = _own_run(session, principal, run_id, lock=True)
    if row.ended_at is None:
        row.ended_at = session.execute(select(func.now())).scalar_one()
        session.flush()
    return _run_of(row)


def _parse_run_id(raw: str) -> uuid.UUID:
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise InvalidInput(f"X-Mnemo-Run {raw!r} is not a run id (a UUID)", code="invalid_run_id") from None


def resolve_access(session: Session, principal: PrincipalContext, catalog: Catalog, *, run_id: str | None,
                   thread_id: str | None) -> Access:
    """The access of one request: the run's snapshot ∩ the current policy ∩ the audience's ceiling.

    Raises a typed error (never an empty access) when the run is missing, ended, foreign or of another
    thread, or when the policy store cannot be read.
    """
    audience = audience_of(principal)
    ceilings = _ceilings(catalog, audience)
    if run_id is None:
        if thread_id is not None:
            raise InvalidInput("X-Mnemo-Thread is checked against a run: send X-Mnemo-Run with it",
                               code="thread_without_run")
        if _is_runtime(principal):
            raise Forbidden("an agent_runtime key reads for a run: name it with X-Mnemo-Run", code="run_required")
        agent_id = principal.agent_id
        if agent_id is None:  # a user's own key reading their own data: the audience's ceiling alone
            return Access(principal=principal, audience=audience, agent_id=None, run_id=None, grants=ceilings)
        with _policy_store("reading the agent's policy"):
            policies = current_policies(session, principal.tenant_id, agent_id)
        return Access(principal=principal, audience=audience, agent_id=agent_id, run_id=None,
                      grants=_narrowed(ceilings, policies))
    run_uuid = _parse_run_id(run_id)
    with _policy_store("reading the run"):
        run = _run_of(_own_run(session, principal, run_uuid))
    if run.ended_at is not None:
        # A 403, not a 409: the run is over for good, and every read (GETs included) documents a 403.
        raise Forbidden(f"run {run_uuid} ended at {run.ended_at.isoformat()}", code="run_ended")
    if thread_id is not None and thread_id != run.thread_id:
        raise Forbidden(f"run {run_uuid} is not of thread {thread_id!r}", code="run_thread_mismatch")
    if principal.agent_id is not None and principal.agent_id != run.agent_id:
        raise Forbidden(f"this key is agent {principal.agent_id}'s; run {run_uuid} is agent {run.agent_id}'s",
                        code="run_agent_mismatch")
    with _policy_store("reading the agent's policy"):
        policies = current_policies(session, principal.tenant_id, run.agent_id)
    return Access(principal=principal, audience=audience, agent_id=run.agent_id, run_id=str(run_uuid),
                  grants=_narrowed(ceilings, run.snapshot, policies))


def access_for(engine: Engine, principal: PrincipalContext, catalog: Catalog, *, run_id: str | None,
               thread_id: str | None) -> Access:
    """:func:`resolve_access` in a transaction of its own: computed for every request and every MCP tool call (a
    revocation applies to the very next one)."""
    with tenant_session(engine, principal.tenant_id) as session:
        return resolve_access(session, principal, catalog, run_id=run_id, thread_id=thread_id)
