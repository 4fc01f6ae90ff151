"""Sessions: open one, post its messages, read its state, window and summaries, commit a stage."""

from __future__ import annotations

import asyncio
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response, status

from api.admission import starts
from api.deps import CurrentPrincipal, EngineDep, SettingsDep, TemporalSource
from api.schemas.common import replay_of
from api.schemas.sessions import (
    CommitAcceptedOut,
    CommitIn,
    CommitOut,
    MessagesIn,
    MessagesOut,
    SessionCreatedOut,
    SessionIn,
    SessionOut,
    StoredEventOut,
)
from api.services.deletions import start_job
from api.services.sessions import start_commit, start_due_commit
from memory.db import tenant_session
from memory.deletion.instructed import forget_now
from memory.errors import NotFound
from memory.models import DeletionJob
from memory.sessions import archive, commits, store
from memory.sessions.messages import ToolCall
from memory.sessions.models import SessionCommit
from memory.sessions.policy import commit_if_due
from memory.sessions.recent import session_state, session_window
from memory.sessions.remember import remember_now
from memory.store.events import request_digest

router = APIRouter(tags=["sessions"])


@router.post("/sessions", status_code=status.HTTP_201_CREATED, responses=replay_of(SessionCreatedOut))
def open_session(
    body: SessionIn, principal: CurrentPrincipal, engine: EngineDep, response: Response
) -> SessionCreatedOut:
    """Open a session of the caller (idempotent by the client's ``session_id``; without one, a new id)."""
    new = store.NewSession(
        session_id=body.session_id or f"s-{uuid.uuid4().hex}",
        project_id=body.project_id,
        task_id=body.task_id,
        title=body.title,
    )
    digest = request_digest(body.model_dump(mode="json", exclude={"session_id"}))
    with tenant_session(engine, principal.tenant_id) as session:
        chat, created = store.open_session(session, principal, new, digest)
    if not created:
        response.status_code = status.HTTP_200_OK
    return SessionCreatedOut(session_id=chat.session_id, status=chat.status, replayed=not created)


@router.post("/sessions/{session_id}/messages", status_code=status.HTTP_201_CREATED, responses=replay_of(MessagesOut))
async def post_messages(
    session_id: str, body: MessagesIn, request: Request, principal: CurrentPrincipal, engine: EngineDep,
    settings: SettingsDep, temporal: TemporalSource, response: Response,
) -> MessagesOut:
    """Store up to 500 messages in one transaction, numbered in order; a replay returns the first result.

    A message asking to remember something is written as a memory at once (``remembered``); when the
    uncommitted messages reach the commit policy's thresholds, a commit starts by itself (``commit``) when the
    tenant's workflow start budget allows (else the next batch or the idle sweep starts it). The deletions a
    "don't remember …" starts (``forgotten``) spend the deletion start budget: past it, nothing is written."""
    messages = [
        store.NewMessage(
            idempotency_key=m.idempotency_key,
            role=m.role,
            content=m.content,
            created_at=m.created_at,
            tool_calls=tuple(ToolCall(c.id, c.name, c.arguments) for c in m.tool_calls),
            tool_call_id=m.tool_call_id,
            context_refs=tuple(m.context_refs),
            skill_execution=m.skill_execution.report() if m.skill_execution else None,
        )
        for m in body.messages
    ]
    digests = [request_digest(m.digest_body()) for m in body.messages]
    deletions = starts(request.app.state, "deletion", principal.tenant_id)
    workflows = starts(request.app.state, "workflow", principal.tenant_id)

    def write() -> tuple[list[store.StoredMessage], list[dict[str, Any]], list[DeletionJob], commits.Accepted | None]:
        with tenant_session(engine, principal.tenant_id) as session:
            stored = store.append_messages(session, principal, session_id, messages, digests)
            chat = store.get_session(session, principal, session_id, lock=True)
            said = [s.as_stage_message() for s in stored]
            forgotten = forget_now(session, principal, said, deletions.admit)
            remembered = remember_now(session, principal, chat, said)
            due = commit_if_due(session, chat, settings.commit_policy()) if workflows.available(1) else None
            return stored, remembered, forgotten, due

    stored, remembered, forgotten, due = await asyncio.to_thread(write)
    deletions.spend()
    if due is not None:
        workflows.spend()
    for job in forgotten:  # a start that fails stays in the deletion outbox for the workers' drain
        await start_job(temporal, engine, settings, job)
    if all(s.replayed for s in stored):
        response.status_code = status.HTTP_200_OK
    started: dict[str, Any] | None = None
    if due is not None:
        started = {"commit_id": due.commit.commit_id, "trigger": due.commit.trigger, "status": due.commit.status}
        failure = await start_due_commit(temporal, settings, due.commit)
        if failure is not None:
            started["status"] = f"accepted; not started yet ({failure}), the workers' sweep starts it"
    return MessagesOut(
        events=[StoredEventOut(event_id=s.event_id, sequence_no=s.sequence_no, replayed=s.replayed) for s in stored],
        sequence_range={"from": min(s.sequence_no for s in stored), "to": max(s.sequence_no for s in stored)},
        remembered=remembered,
        forgotten=[{"memory_id": job.scope.get("memory_id"), "job_id": str(job.job_id),
                    "deletion_request_id": job.deletion_request_id} for job in forgotten],
        commit=started,
    )


def _commit_out(commit: SessionCommit) -> CommitOut:
    return CommitOut(
        commit_id=commit.commit_id, session_id=commit.session_id, status=commit.status, trigger=commit.trigger,
        workflow_id=commit.workflow_id, sequence_range={"from": commit.from_sequence, "to": commit.to_sequence},
        summary_id=commit.summary_id,
        memories={k: v for k, v in commit.memories.items() if k != "proposed"},
        stats=commit.stats, reasons=commit.reasons, error=commit.error,
        created_at=commit.created_at, completed_at=commit.completed_at,
    )


@router.post("/sessions/{session_id}/commit", status_code=status.HTTP_202_ACCEPTED)
async def commit_session(
    session_id: str, body: CommitIn, principal: CurrentPrincipal, engine: EngineDep, settings: SettingsDep,
    temporal: TemporalSource,
) -> CommitAcceptedOut:
    """Archive the messages since the last commit and turn them into memories, in a workflow (202 at once).

    Idempotent by ``commit_id``: a replay answers the first acceptance (and starts its workflow if an
    earlier attempt could not reach Temporal)."""

    def accept() -> commits.Accepted:
        with tenant_session(engine, principal.tenant_id) as session:
            return commits.accept_commit(session, principal, session_id, body.commit_id)

    accepted = await asyncio.to_thread(accept)
    await start_commit(temporal, settings, accepted.commit)
    commit = accepted.commit
    return CommitAcceptedOut(
        commit_id=commit.commit_id, workflow_id=commit.workflow_id, status=commit.status,
        sequence_range={"from": commit.from_sequence, "to": commit.to_sequence}, replayed=accepted.replayed,
    )


@router.get("/sessions/{session_id}/commits/{commit_id}")
def read_commit(session_id: str, commit_id: str, principal: CurrentPrincipal, engine: EngineDep) -> CommitOut:
    """A commit's status, what it created, merged and skipped (with evidence), and its figures."""
    with tenant_session(engine, principal.tenant_id) as session:
        return _commit_out(commits.read_commit(session, principal, session_id, commit_id))


@router.get("/sessions/{session_id}")
def read_session(session_id: str, principal: CurrentPrincipal, engine: EngineDep) -> SessionOut:
    """The session, its derived state (active task, entities, temporary constraints, pending questions) and
    the profile injected at its start (re-read: a deleted or corrected memory shows as it is now)."""
    with tenant_session(engine, principal.tenant_id) as session:
        chat = store.get_session(session, principal, session_id)
        links = store.links_of(session, chat)
    state, profile = session_state(engine, principal, session_id, chat.next_sequence - 1)
    return SessionOut(
        session_id=chat.session_id, status=chat.status, project_id=chat.project_id, task_id=chat.task_id,
        title=chat.title, agent_id=chat.agent_id, created_at=chat.created_at, last_message_at=chat.last_message_at,
        messages=chat.next_sequence - 1, committed_through=chat.committed_through, state=state, profile=profile,
        links=links,
    )


@router.get("/sessions/{session_id}/window")
def read_window(
    session_id: str, principal: CurrentPrincipal, engine: EngineDep,
    budget_tokens: Annotated[int, Query(ge=1, le=1_000_000)] = 4_000,
) -> dict[str, Any]:
    """The messages to hand the model within ``budget_tokens``: by priority (P0 current request, safety rules,
    pending questions, the profile; P1 task state, recent tool results, corrections; P2 history and
    decisions; P3 chit-chat, repeats), then recency; what does not fit is listed in ``dropped``."""
    return session_window(engine, principal, session_id, budget_tokens)


@router.get("/sessions/{session_id}/summaries/latest")
def latest_summary(session_id: str, principal: CurrentPrincipal, engine: EngineDep) -> dict[str, Any]:
    """The newest structured summary version (built by commits; rebuilt when a source event is deleted)."""
    with tenant_session(engine, principal.tenant_id) as session:
        row = archive.latest_summary(session, store.get_session(session, principal, session_id))
        if row is None:
            raise NotFound(f"session {session_id!r} has no summary yet: commit a stage first")
        return {
            "summary_id": str(row.summary_id), "version": row.version, "reason": row.reason,
            "commit_id": row.commit_id, **row.body,
            "source_range": {"from": row.from_sequence, "to": row.to_sequence},
            "abstract": row.abstract, "overview": row.overview, "task_observation": row.task_observation,
            "task_observation_note": archive.REREAD_NOTE if row.task_observation else None,
            "created_at": row.created_at.isoformat(),
        }
