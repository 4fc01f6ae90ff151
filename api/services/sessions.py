"""A session commit's workflow start: the one Temporal call the sessions API makes (the commit's state and
rules are :mod:`memory.sessions.commits`')."""

from __future__ import annotations

import contextlib

from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from api.services.client import ClientSource, TemporalUnavailable
from api.settings import Settings
from memory.sessions.commits import TERMINAL, CommitStatus, ref_of
from memory.sessions.models import SessionCommit
from workflows.fairness import tenant_priority
from workflows.session_commit import SessionCommitWorkflow


async def start_commit(temporal: ClientSource, settings: Settings, commit: SessionCommit) -> None:
    """Start the commit's workflow under its deterministic id (a repeated start joins the first)."""
    client = await temporal()  # first: a replay of a finished commit while Temporal is down stays a 503
    if CommitStatus(commit.status) in TERMINAL:
        return
    with contextlib.suppress(WorkflowAlreadyStartedError):  # the run closed: it was this commit's
        await client.start_workflow(
            SessionCommitWorkflow.run,
            ref_of(commit),
            id=commit.workflow_id,
            task_queue=settings.task_queue,
            priority=tenant_priority(commit.tenant_id),
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )


async def start_due_commit(temporal: ClientSource, settings: Settings, commit: SessionCommit) -> str | None:
    """Start a commit the message policy made due; the failure's kind if Temporal could not take it now (the
    commit is accepted all the same, and the workers' sweep starts it later)."""
    try:
        await start_commit(temporal, settings, commit)
    except (TemporalUnavailable, RPCError, RuntimeError) as exc:
        return type(exc).__name__
    return None
