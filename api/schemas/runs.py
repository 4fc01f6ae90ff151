"""Request and response models of runs (POST /runs, GET /runs/{id}, POST /runs/{id}/end) and of per-agent
resource policies (PUT, GET and DELETE /policies/{agent_id}/{resource})."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, ClassVar

from pydantic import BaseModel, Field

from api.schemas.common import IDENTITY_FIELDS, Lax, StrictRequest
from memory.resources.declarations import Operation

ClientId = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9@._:-]*$")]
"""An agent or thread id: letters, digits and ``@ . _ : -``."""


class RunIn(StrictRequest):
    """The one body that names an agent: the trusted runtime says which agent it runs (a key bound to an agent
    may only name that one). The run's tenant and user still come from the key."""

    identity_fields: ClassVar[frozenset[str]] = IDENTITY_FIELDS - {"agent_id"}

    thread_id: ClientId = Field(description="The conversation or task context the run belongs to")
    agent_id: ClientId = Field(description="The agent this run executes; its policy is what the run may read")


class GrantOut(BaseModel):
    resource: str
    operations: list[str] = Field(description="Among list, search, read")
    fields: list[str] = Field(description="Field paths (JSON Pointers, `*` for array items)")


class RunOut(BaseModel):
    run_id: str = Field(description="Send it as the `X-Mnemo-Run` header of every read of the run")
    thread_id: str
    agent_id: str
    user_id: str = Field(description="The user the run reads for: the registering key's")
    snapshot: list[GrantOut] = Field(description="The access frozen when the run started; reads never exceed it")
    started_at: datetime
    ended_at: datetime | None


class PolicyIn(StrictRequest):
    operations: list[Annotated[Operation, Lax]] = Field(min_length=1, description="Among those the type offers")
    fields: list[str] = Field(min_length=1, description="Field paths the type's schema has; one must cover its title")


class AgentPolicyOut(BaseModel):
    agent_id: str
    resource: str
    operations: list[str]
    fields: list[str]
    updated_at: datetime
    updated_by: str


class AgentPoliciesOut(BaseModel):
    agent_id: str
    policies: list[AgentPolicyOut] = Field(description="By resource type; a type not here is not readable")


class PolicyDeletedOut(BaseModel):
    """What the agent could do with the type until now; it can do nothing with it from the next read on."""

    agent_id: str
    resource: str
    revoked: GrantOut
