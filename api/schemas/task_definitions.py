"""Request and response bodies of ``/task-definitions``: a task type's definition as data, versioned."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from memory.tasks.definitions import MAX_STEPS, STEP_ID, STEP_KINDS, VERSION

DEFINITION_EXAMPLE: dict[str, Any] = {
    "version": "1",
    "goal_schema": {"type": "object", "properties": {"service": {"type": "string"}}, "required": ["service"],
                    "additionalProperties": False},
    "steps": [
        {"step_id": "collect", "kind": "agent", "description": "collect the week's incidents as incidents.json"},
        {"step_id": "render", "kind": "compute", "function": "incident_digest.render"},
        {"step_id": "review", "kind": "approval", "artifact_from": "render/digest.md"},
        {"step_id": "publish", "kind": "publish", "destination": "archive"},
    ],
    "redraft_step": "render",
}

DEFINITION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A task type's definition: its goal's JSON Schema and its steps in order. Refused whole, with "
                   "every problem's path and code in details.problems (422 invalid_definition)",
    "required": ["version", "goal_schema", "steps"],
    "additionalProperties": False,
    "properties": {
        "version": {"type": "string", "pattern": VERSION.pattern,
                    "description": "Immutable once registered: a new body needs a new version"},
        "goal_schema": {"type": "object", "description": 'JSON Schema (2020-12) of a task\'s goal, "type": "object"'},
        "steps": {
            "type": "array", "minItems": 1, "maxItems": MAX_STEPS,
            "items": {
                "type": "object", "required": ["step_id", "kind"],
                "properties": {"step_id": {"type": "string", "pattern": STEP_ID.pattern},
                               "kind": {"type": "string", "enum": list(STEP_KINDS)}},
                "description": "Each kind has its own keys (README, Task definitions)",
            },
        },
        "redraft_step": {"type": "string", "pattern": STEP_ID.pattern,
                         "description": "The step re-run with the reviewer's reason; required with an approval"},
    },
    "examples": [DEFINITION_EXAMPLE],
}
"""What the OpenAPI says of a definition's body; the parser (:func:`memory.tasks.definitions.from_body`) has the
rules the schema cannot say (references between steps, each kind's keys)."""


class DefinitionPutOut(BaseModel):
    task_type: str
    version: str
    sha256: str = Field(description="Of the body's canonical JSON: the same body again is the same hash")
    replayed: bool = Field(description="This very body was registered already: nothing was written")


class StepOut(BaseModel):
    step_id: str
    kind: str


class DefinitionSummaryOut(BaseModel):
    task_type: str
    source: Literal["builtin", "code", "tenant"] = Field(
        description="builtin: mnemo's own type; code: a task module's (the SDK); neither may be PUT by a tenant")
    latest_version: str = Field(description="The version new tasks start on: the one registered last")
    versions: list[str] = Field(description="Oldest first")
    steps: list[StepOut] = Field(description="The latest version's steps, in order")


class DefinitionsOut(BaseModel):
    items: list[DefinitionSummaryOut]


class DefinitionVersionOut(BaseModel):
    version: str
    sha256: str
    body: dict[str, Any]
    created_at: datetime | None = Field(description="None for a built-in type")
    created_by: str | None = Field(description="The admin who registered it; None for a built-in type")


class DefinitionOut(BaseModel):
    task_type: str
    source: Literal["builtin", "code", "tenant"]
    versions: list[DefinitionVersionOut] = Field(description="Oldest first")
