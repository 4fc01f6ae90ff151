"""The services of ``api/services`` called directly, without HTTP, against the real stack.

They are the one home of the API's and the console's Temporal calls, so what they promise is checked here on
its own: a deletion accepted while Temporal cannot be reached stays queued with its error and is started by a
repeat once it can; an Update's refusal keeps its code; a due commit that cannot start is reported, not raised.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from api.deps import authenticated
from api.services import deletions, sessions, tasks
from api.services.client import TemporalUnavailable
from api.settings import Settings
from api.temporal import connect
from memory.db import tenant_session
from memory.errors import Conflict, Forbidden, InvalidInput
from memory.models import DeletionOutbox
from memory.sessions.commits import CommitStatus
from memory.sessions.models import SessionCommit
from tests.conftest import MakeKey, auth
from tests.factories import candidate


async def _down() -> Client:
    raise TemporalUnavailable("Temporal is not reachable: connection refused")


def _outbox(engine: Engine, tenant_id: str, job_id: uuid.UUID) -> DeletionOutbox | None:
    with tenant_session(engine, tenant_id) as session:
        row = session.execute(
            select(DeletionOutbox).where(DeletionOutbox.tenant_id == tenant_id, DeletionOutbox.job_id == job_id)
        ).scalar_one_or_none()
        if row is not None:
            session.expunge(row)
        return row


def test_a_deletion_accepted_while_temporal_is_down_stays_queued_and_a_repeat_starts_it(
    client: TestClient, engine: Engine, settings: Settings, make_key: MakeKey
) -> None:
    key = make_key()
    written = client.post("/memory-candidates", json=candidate("I prefer tea to coffee"), headers=auth(key))
    assert written.status_code == 201, written.text
    memory_id = uuid.UUID(written.json()["memory_id"])
    principal = authenticated(key, engine)
    # A queue nobody polls: the started workflow only has to exist, not to run.
    quiet = settings.model_copy(update={"task_queue": f"services-{uuid.uuid4().hex[:8]}"})

    down = asyncio.run(deletions.delete_memory(_down, engine, quiet, principal, memory_id))
    assert down.out.purge_scheduled is False
    assert down.out.warnings and "(TemporalUnavailable)" in down.out.warnings[0]
    assert down.server_timing.startswith("barrier;dur=")
    queued = _outbox(engine, principal.tenant_id, down.out.job_id)
    assert queued is not None and queued.attempts == 1
    assert queued.last_error is not None and queued.last_error.startswith("TemporalUnavailable: ")

    async def up() -> Client:
        return await connect(quiet)

    again = asyncio.run(deletions.delete_memory(up, engine, quiet, principal, memory_id))
    assert again.out.job_id == down.out.job_id
    assert again.out.purge_scheduled is True and again.out.warnings == []
    assert _outbox(engine, principal.tenant_id, down.out.job_id) is None


@pytest.mark.parametrize(
    ("code", "error", "status"),
    [
        ("separation_of_duties", Forbidden, 403),
        ("forbidden", Forbidden, 403),
        ("reason_required", InvalidInput, 422),
        ("stale_artifact", Conflict, 409),
    ],
)
def test_an_update_refusal_keeps_the_validators_code(code: str, error: type[Exception], status: int) -> None:
    refused = tasks.refusal(WorkflowUpdateFailedError(ApplicationError("the validator's sentence", type=code)))
    assert type(refused) is error
    assert (refused.code, refused.message, refused.http_status) == (code, "the validator's sentence", status)


def test_a_refusal_without_a_code_is_a_conflict_naming_its_cause() -> None:
    refused = tasks.refusal(WorkflowUpdateFailedError(RuntimeError("boom")))
    assert type(refused) is Conflict
    assert refused.message == "the task refused the request: boom"


def test_a_due_commit_that_cannot_start_is_reported_and_an_asked_for_one_raises(settings: Settings) -> None:
    commit = SessionCommit(status=CommitStatus.ACCEPTED.value, tenant_id="t-none", workflow_id="session-commit-none")
    assert asyncio.run(sessions.start_due_commit(_down, settings, commit)) == "TemporalUnavailable"
    with pytest.raises(TemporalUnavailable):
        asyncio.run(sessions.start_commit(_down, settings, commit))
