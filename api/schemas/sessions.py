"""Sessions, their messages, windows, summaries and commits (seed 003 §4-5, seed 004 §8)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from pydantic import AfterValidator, AwareDatetime, BaseModel, Field
from pydantic_core import PydanticCustomError

from api.schemas.common import Lax, ShortText, StrictRequest, Timestamp
from memory.sessions.messages import MessageRole
from memory.sessions.policy import AUTO_PREFIX
from memory.skills.executions import MAX_NOTE_CHARS, MAX_VERSION_CHARS, Outcome, SkillExecution
from memory.skills.format import NAME
from memory.store.batches import MAX_BATCH_ITEMS

SessionId = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")]
"""Ids a client chooses (sessions, commits): letters, digits and ``. _ : -``; they appear in URLs."""


def _not_automatic(commit_id: str) -> str:
    if commit_id.startswith(AUTO_PREFIX):
        raise PydanticCustomError("reserved_commit_id", "commit ids starting with {prefix} are the commit policy's",
                                  {"prefix": AUTO_PREFIX})
    return commit_id


class SessionIn(StrictRequest):
    session_id: SessionId | None = None
    project_id: ShortText | None = None
    task_id: ShortText | None = None
    title: ShortText | None = None


class SessionCreatedOut(BaseModel):
    session_id: str
    status: str
    replayed: bool


class ToolCallIn(StrictRequest):
    id: ShortText
    name: ShortText
    arguments: Annotated[str, Field(max_length=100_000)] = "{}"


class SkillExecutionIn(StrictRequest):
    """An agent's report that it ran a skill: committed as a SKILL_EXECUTION memory of the agent."""

    skill: Annotated[str, Field(pattern=NAME.pattern, description="The skill's name, as GET /skills lists it")]
    version: Annotated[str, Field(min_length=1, max_length=MAX_VERSION_CHARS, description=(
        "The declared version the agent ran: one a layer of the skill's resolution declares now"))]
    outcome: Annotated[Outcome, Lax]
    note: Annotated[str, Field(min_length=1, max_length=MAX_NOTE_CHARS, pattern=r"\S",
                               description="What happened, in a sentence (no secrets: a note holding one is "
                                           "refused at commit)")]

    def report(self) -> SkillExecution:
        return SkillExecution(self.skill, self.version, self.outcome, self.note.strip())


class MessageIn(StrictRequest):
    idempotency_key: ShortText
    role: Annotated[MessageRole, Lax]
    content: Annotated[str, Field(max_length=100_000)]
    created_at: Timestamp
    tool_calls: Annotated[list[ToolCallIn], Field(max_length=64)] = Field(default_factory=list)
    tool_call_id: ShortText | None = None
    context_refs: Annotated[list[ShortText], Field(max_length=200)] = Field(
        default_factory=list,
        description="refs (memory:<id>) of recalled context this message carries (a bundle or profile "
        "injection handed to the agent): such text is cited by a commit, never extracted again",
    )
    skill_execution: SkillExecutionIn | None = Field(default=None, description=(
        "On an assistant or tool message: the skill run it reports, checked against the caller's skills (422 "
        "unknown_skill, skill_version_mismatch, skill_execution_role, agent_required)"))

    def digest_body(self) -> dict[str, Any]:
        """The body a replay is compared by (without an absent report, as messages were before reports)."""
        return self.model_dump(mode="json", exclude=None if self.skill_execution else {"skill_execution"})


class MessagesIn(StrictRequest):
    messages: Annotated[list[MessageIn], Field(min_length=1, max_length=MAX_BATCH_ITEMS)]


class StoredEventOut(BaseModel):
    event_id: uuid.UUID
    sequence_no: int
    replayed: bool


class MessagesOut(BaseModel):
    events: list[StoredEventOut]
    sequence_range: dict[str, int] = Field(description='{"from": first sequence_no, "to": last sequence_no}')
    remembered: list[dict[str, Any]] = Field(
        default_factory=list, description="memories written at once because a message asked to remember (E1)"
    )
    forgotten: list[dict[str, Any]] = Field(
        default_factory=list,
        description="deletions requested at once because a message asked not to remember what a memory says "
        "(memory_id, job_id, deletion_request_id; follow the job at GET /memory-deletions/{job_id})",
    )
    commit: dict[str, Any] | None = Field(
        default=None, description="a commit these messages started by policy (pending messages or tokens)"
    )


class SessionOut(BaseModel):
    session_id: str
    status: str
    project_id: str | None
    task_id: str | None
    title: str | None
    agent_id: str | None
    created_at: AwareDatetime
    last_message_at: AwareDatetime | None
    messages: int = Field(description="messages stored (the last sequence_no)")
    committed_through: int = Field(description="the last sequence_no a commit has claimed")
    state: dict[str, Any]
    profile: list[dict[str, Any]] = Field(description="the profile injected at session start, re-read now")
    links: list[dict[str, Any]] = Field(
        description="what the session used (memory refs its messages carried, the profile) and produced "
        "(memories its commits created or merged): target, relation, commit_id"
    )


class CommitIn(StrictRequest):
    commit_id: Annotated[SessionId, AfterValidator(_not_automatic)]


class CommitAcceptedOut(BaseModel):
    commit_id: str
    workflow_id: str
    status: str
    sequence_range: dict[str, int]
    replayed: bool


class CommitOut(BaseModel):
    commit_id: str
    session_id: str
    status: str
    trigger: str
    workflow_id: str
    sequence_range: dict[str, int]
    summary_id: uuid.UUID | None
    memories: dict[str, Any]
    stats: dict[str, Any]
    reasons: list[dict[str, Any]]
    error: str | None
    created_at: AwareDatetime
    completed_at: AwareDatetime | None


__all__ = [
    "CommitAcceptedOut", "CommitIn", "CommitOut", "MessageIn", "MessagesIn", "MessagesOut",
    "SessionCreatedOut", "SessionIn", "SessionOut", "StoredEventOut",
]
