"""Runs (seed 000 §3.1): the trusted runtime registers one per agent execution, reads name it with the
``X-Mnemo-Run`` header (:mod:`api.access`), and the runtime ends it."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, status

from api.deps import CatalogDep, CurrentPrincipal, EngineDep
from api.schemas.runs import GrantOut, RunIn, RunOut
from memory.db import tenant_session
from memory.errors import NotFound
from memory.resources.access import Grant
from memory.resources.runs import Run, end_run, get_run, register_run

router = APIRouter(tags=["runs"])


def _run_id(raw: str) -> uuid.UUID:
    """A malformed path id is a run that does not exist: the very 404 of a missing (or another user's) run."""
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise NotFound(f"run {raw} does not exist", code="run_not_found") from None


def grant_out(grant: Grant) -> GrantOut:
    return GrantOut(resource=grant.resource, operations=sorted(op.value for op in grant.operations),
                    fields=list(grant.fields))


def run_out(run: Run) -> RunOut:
    return RunOut(
        run_id=str(run.run_id), thread_id=run.thread_id, agent_id=run.agent_id, user_id=run.user_id,
        snapshot=[grant_out(grant) for _, grant in sorted(run.snapshot.items())],
        started_at=run.started_at, ended_at=run.ended_at,
    )


@router.post("/runs", status_code=status.HTTP_201_CREATED)
def start_run(body: RunIn, principal: CurrentPrincipal, engine: EngineDep, catalog: CatalogDep) -> RunOut:
    """An ``agent_runtime`` key registers a run of ``agent_id`` for its user; the snapshot is the agent's policy
    ∩ the audience's ceiling now. A policy store that cannot be read refuses the run (503 ``policy_unavailable``)."""
    with tenant_session(engine, principal.tenant_id) as session:
        return run_out(register_run(session, principal, catalog, body.thread_id, body.agent_id))


@router.get("/runs/{run_id}")
def read_run(run_id: str, principal: CurrentPrincipal, engine: EngineDep) -> RunOut:
    """A run of your user (another user's or tenant's is the 404 of a missing one)."""
    with tenant_session(engine, principal.tenant_id) as session:
        return run_out(get_run(session, principal, _run_id(run_id)))


@router.post("/runs/{run_id}/end")
def finish_run(run_id: str, principal: CurrentPrincipal, engine: EngineDep) -> RunOut:
    """The runtime ends a run: any later read naming it is a 409 ``run_ended``. Ending it again is a no-op."""
    with tenant_session(engine, principal.tenant_id) as session:
        return run_out(end_run(session, principal, _run_id(run_id)))
