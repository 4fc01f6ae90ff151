"""The deletion status machine refuses transitions it does not allow; fault specs parse strictly."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import Engine

from activities.deletion import FaultPlan
from memory.db import tenant_session
from memory.deletion.barrier import ScopeRequest, request_deletion
from memory.deletion.jobs import InvalidTransition, JobStatus, get_job, transition
from memory.deletion.scope import ScopeType
from memory.identity.auth import PrincipalContext
from tests.conftest import MakeKey


def test_only_allowed_transitions_happen(engine: Engine, make_key: MakeKey) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    make_key(tenant=tenant, user="frank")
    frank = PrincipalContext(tenant, "frank", None, frozenset(), "k")
    with tenant_session(engine, tenant) as session:
        job = request_deletion(session, frank, "r1", ScopeRequest(ScopeType.SUBJECT), "digest").job
        with pytest.raises(InvalidTransition, match="from accepted to completed"):
            transition(session, job, JobStatus.COMPLETED)
        transition(session, job, JobStatus.RUNNING)
        transition(session, job, JobStatus.COMPLETED)
        for later in (JobStatus.RUNNING, JobStatus.RETRY_WAIT, JobStatus.FAILED_REQUIRES_ACTION):
            with pytest.raises(InvalidTransition):
                transition(session, job, later)
        assert get_job(session, tenant, job.job_id).status == "completed"


def test_fault_specs_are_parsed_strictly() -> None:
    plan = FaultPlan.from_spec(
        "hang-after-first-batch:primary_memories, fail:search_projection, fail:search_projection"
    )
    assert plan.hang_after_first_batch == {"primary_memories"}
    assert plan.fail == {"search_projection": 2}
    with pytest.raises(ValueError):
        FaultPlan.from_spec("fail:primary_memoreis")
    with pytest.raises(ValueError, match="unknown deletion fault"):
        FaultPlan.from_spec("explode:primary_memories")
